//! What goes on the wire before any data: a fixed hello that names the protocol, its version,
//! the job's random token and who is speaking; then, on store connections, length-prefixed
//! JSON frames with a hard size limit. A peer that gets any of it wrong is dropped and logged.
//! Data connections carry each call's header ([`crate::comm::cpu::header`]) and then raw element bytes in
//! schedule order: both ends know the schedule.

use std::io::{self, Read, Write};

pub const MAGIC: [u8; 4] = *b"RLAB";
pub const VERSION: u16 = 1;
pub const TOKEN_LEN: usize = 16;
pub const HELLO_LEN: usize = 4 + 2 + TOKEN_LEN + 1 + 4;
/// Largest store frame accepted (keys and values are addresses and small ids).
pub const MAX_FRAME: usize = 1 << 20;

pub type Token = [u8; TOKEN_LEN];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Store = 1,
    Peer = 2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub token: Token,
    pub role: Role,
    pub rank: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("not a ringlab connection (bad magic {0:02x?})")]
    BadMagic([u8; 4]),
    #[error("protocol version {got}, this ringlab speaks {VERSION}")]
    BadVersion { got: u16 },
    #[error("wrong job token")]
    BadToken,
    #[error("unknown role {0}")]
    BadRole(u8),
    #[error("frame of {0} bytes is over the {MAX_FRAME}-byte limit")]
    FrameTooLarge(usize),
    #[error("malformed frame: {0}")]
    Malformed(String),
    #[error(transparent)]
    Io(#[from] io::Error),
}

pub fn new_token() -> io::Result<Token> {
    let mut t = [0u8; TOKEN_LEN];
    getrandom::fill(&mut t).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(t)
}

pub fn token_hex(t: &Token) -> String {
    t.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn token_from_hex(s: &str) -> Option<Token> {
    if s.len() != TOKEN_LEN * 2 || !s.is_ascii() {
        return None;
    }
    let mut t = [0u8; TOKEN_LEN];
    for (i, b) in t.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(t)
}

impl Hello {
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..4].copy_from_slice(&MAGIC);
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        b[6..6 + TOKEN_LEN].copy_from_slice(&self.token);
        b[6 + TOKEN_LEN] = self.role as u8;
        b[7 + TOKEN_LEN..].copy_from_slice(&self.rank.to_le_bytes());
        b
    }

    /// Read a hello and check it belongs to this job.
    pub fn read_checked(r: &mut impl Read, token: &Token) -> Result<Self, WireError> {
        let mut b = [0u8; HELLO_LEN];
        r.read_exact(&mut b)?;
        let magic = [b[0], b[1], b[2], b[3]];
        if magic != MAGIC {
            return Err(WireError::BadMagic(magic));
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        if version != VERSION {
            return Err(WireError::BadVersion { got: version });
        }
        let mut got = [0u8; TOKEN_LEN];
        got.copy_from_slice(&b[6..6 + TOKEN_LEN]);
        // Constant-time enough for a lab: compare every byte.
        if got.iter().zip(token).fold(0u8, |acc, (a, b)| acc | (a ^ b)) != 0 {
            return Err(WireError::BadToken);
        }
        let role = match b[6 + TOKEN_LEN] {
            1 => Role::Store,
            2 => Role::Peer,
            r => return Err(WireError::BadRole(r)),
        };
        let rank = u32::from_le_bytes([
            b[7 + TOKEN_LEN],
            b[8 + TOKEN_LEN],
            b[9 + TOKEN_LEN],
            b[10 + TOKEN_LEN],
        ]);
        Ok(Self {
            token: got,
            role,
            rank,
        })
    }
}

/// Write one length-prefixed frame.
pub fn write_frame(w: &mut impl Write, payload: &[u8]) -> Result<(), WireError> {
    if payload.len() > MAX_FRAME {
        return Err(WireError::FrameTooLarge(payload.len()));
    }
    // One write: a length written alone and then the payload is the write-write-read pattern
    // that Nagle's algorithm and a delayed ACK turn into 40 ms per request on Linux.
    let mut frame = Vec::with_capacity(4 + payload.len());
    frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    frame.extend_from_slice(payload);
    w.write_all(&frame)?;
    w.flush()?;
    Ok(())
}

/// Read one frame, refusing anything over MAX_FRAME before allocating for it.
pub fn read_frame(r: &mut impl Read) -> Result<Vec<u8>, WireError> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(WireError::FrameTooLarge(len));
    }
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the writes it is given.
    struct Writes(Vec<Vec<u8>>);
    impl Write for Writes {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.push(b.to_vec());
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_frame_goes_out_in_one_write_and_reads_back() {
        // Two writes (length, then payload) wait 40 ms on a delayed ACK under Nagle.
        let mut w = Writes(Vec::new());
        write_frame(&mut w, b"{\"op\":\"get\"}").expect("write");
        assert_eq!(w.0.len(), 1, "{:?}", w.0);
        let frame = &w.0[0];
        assert_eq!(
            read_frame(&mut &frame[..]).expect("read"),
            b"{\"op\":\"get\"}"
        );
    }

    #[test]
    fn hello_round_trips_and_rejects_strangers() {
        let token = [7u8; TOKEN_LEN];
        let h = Hello {
            token,
            role: Role::Peer,
            rank: 3,
        };
        let bytes = h.encode();
        assert_eq!(Hello::read_checked(&mut &bytes[..], &token).expect("ok"), h);
        assert!(matches!(
            Hello::read_checked(&mut &bytes[..], &[8u8; TOKEN_LEN]),
            Err(WireError::BadToken)
        ));
        let mut v2 = bytes;
        v2[4] = 2;
        assert!(matches!(
            Hello::read_checked(&mut &v2[..], &token),
            Err(WireError::BadVersion { got: 2 })
        ));
        let http = *b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        assert!(matches!(
            Hello::read_checked(&mut &http[..], &token),
            Err(WireError::BadMagic(_))
        ));
    }

    #[test]
    fn oversized_frames_are_refused_before_allocation() {
        let mut buf = Vec::new();
        buf.extend_from_slice(&(u32::MAX).to_le_bytes());
        assert!(matches!(
            read_frame(&mut &buf[..]),
            Err(WireError::FrameTooLarge(_))
        ));
    }

    #[test]
    fn token_hex_round_trips() {
        let t = new_token().expect("random");
        assert_eq!(token_from_hex(&token_hex(&t)), Some(t));
        assert_eq!(token_from_hex("zz"), None);
    }
}
