//! Who is calling: the kernel's word for the owner of a TCP connection from this host. A Unix
//! socket would say it with SO_PEERCRED; a TCP connection from an address of this host (in this
//! network namespace) has its other end in this host's socket table, `/proc/net/tcp` and
//! `/proc/net/tcp6`, with the uid that owns it. The store and every rank's listener refuse a
//! connection from this host that another uid owns (issue 47, finding H3): a local stranger
//! cannot join a job, whatever token it derives. Connections from other hosts cannot be asked
//! this: across hosts only the job's secret token keeps strangers out.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};

/// Is `ip` an address of this host (in this network namespace)? Only such an address can be
/// bound.
fn is_ours(ip: IpAddr) -> bool {
    ip.is_loopback() || UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// `0100007F:1F90` → 127.0.0.1:8080; the 32-bit words of the address in the kernel's byte
/// order (little-endian here), the port in hex.
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (a, p) = s.split_once(':')?;
    let port = u16::from_str_radix(p, 16).ok()?;
    let words: Vec<u32> = (0..a.len() / 8)
        .map(|i| u32::from_str_radix(&a[i * 8..i * 8 + 8], 16).ok())
        .collect::<Option<_>>()?;
    let ip = match words.as_slice() {
        [w] => IpAddr::V4(Ipv4Addr::from(w.swap_bytes())),
        [a, b, c, d] => {
            let mut o = [0u8; 16];
            for (i, w) in [a, b, c, d].iter().enumerate() {
                o[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(o))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The same address, IPv4 where it is an IPv4-mapped IPv6 one.
fn plain(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
            None => a,
        },
        IpAddr::V4(_) => a,
    }
}

/// The uid owning the socket whose local end is `theirs` and remote end is `ours`, in the
/// text of `/proc/net/tcp` or `tcp6`.
pub fn uid_in(table: &str, theirs: SocketAddr, ours: SocketAddr) -> Option<u32> {
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let local = plain(parse_addr(f.get(1)?)?);
        let remote = plain(parse_addr(f.get(2)?)?);
        // ESTABLISHED only: a TIME_WAIT entry of an earlier connection with the same four
        // addresses belongs to no process (uid 0).
        let live = f.get(3).is_some_and(|st| *st == "01");
        (live && local == plain(theirs) && remote == plain(ours))
            .then(|| f.get(7)?.parse().ok())
            .flatten()
    })
}

/// Refuse `conn` if it comes from this host and another uid owns its other end (or the owner
/// cannot be found for a connection from this host). Connections from other hosts pass: the
/// token decides those.
pub fn check(conn: &TcpStream) -> io::Result<()> {
    let (theirs, ours) = (conn.peer_addr()?, conn.local_addr()?);
    if !is_ours(plain(theirs).ip()) {
        return Ok(());
    }
    let me = crate::private::euid();
    // This thread's network namespace, which may not be the process's: the hang lab's store
    // listens inside a node's namespace from a thread that entered it (/proc/net is the
    // main thread's).
    let owner = [
        "/proc/thread-self/net/tcp",
        "/proc/thread-self/net/tcp6",
        "/proc/net/tcp",
        "/proc/net/tcp6",
    ]
    .iter()
    .filter_map(|p| std::fs::read_to_string(p).ok())
    .find_map(|t| uid_in(&t, theirs, ours));
    match owner {
        Some(uid) if uid == me => Ok(()),
        Some(uid) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("a process of uid {uid} on this host, not this job's uid {me}: refused"),
        )),
        None => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "from this host, but its owner is not in /proc/net/tcp: refused".to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_tcp_addresses_read_as_the_kernel_writes_them() {
        assert_eq!(
            parse_addr("0100007F:1F90"),
            Some("127.0.0.1:8080".parse().expect("addr"))
        );
        assert_eq!(
            parse_addr("0000000000000000FFFF00000100007F:0050").map(plain),
            Some("127.0.0.1:80".parse().expect("addr"))
        );
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
            0: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1003        0 1 1 0 20 4 30 10 -1\n";
        let uid = uid_in(
            table,
            "127.0.0.1:40000".parse().expect("a"),
            "127.0.0.1:8080".parse().expect("b"),
        );
        assert_eq!(uid, Some(1003));
    }

    #[test]
    fn a_connection_of_this_process_is_its_own() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (s, _) = l.accept().expect("accept");
        assert!(check(&s).is_ok(), "{:?}", check(&s));
        drop(c);
    }
}
