//! `ringlab __loopback`: the loopback ceiling the TCP numbers are compared with.

use super::*;

#[derive(Debug, Clone, clap::Args)]
pub struct LoopbackArgs {
    /// Bytes each side sends (timed; an untimed quarter of it first warms the connection).
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    pub bytes: u64,
    /// Bytes per write and read, from one buffer reused (so a size that fits the cache is
    /// streamed from the cache, as a collective of that size is): the ceiling matched to a
    /// message size.
    #[arg(long, default_value = "4M", value_parser = parse_size)]
    pub msg: u64,
    /// (internal) connect to this port as the second process.
    #[arg(long)]
    pub connect: Option<u16>,
}

/// Each side sends `bytes` while receiving as many: a send thread and a receive loop, writes
/// and reads of `msg` bytes.
fn stream_both_ways(s: &std::net::TcpStream, bytes: u64, msg: u64) -> io::Result<()> {
    use std::io::Read;
    let msg = usize::try_from(msg.max(1)).unwrap_or(4 << 20);
    let mut tx = s.try_clone()?;
    let sender = std::thread::spawn(move || -> io::Result<()> {
        let buf = vec![7u8; msg];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(buf.len() as u64) as usize;
            tx.write_all(&buf[..n])?;
            left -= n as u64;
        }
        Ok(())
    });
    let mut rx = s.try_clone()?;
    let mut buf = vec![0u8; msg];
    let mut left = bytes;
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        let n = rx.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        left -= n as u64;
    }
    sender
        .join()
        .map_err(|_| io::Error::other("sender panicked"))?
}

/// The loopback ceiling: two processes streaming both ways at once over 127.0.0.1.
pub fn loopback(args: &LoopbackArgs) -> anyhow::Result<ExitCode> {
    if let Some(port) = args.connect {
        let s = std::net::TcpStream::connect(("127.0.0.1", port))?;
        crate::comm::cpu::net::tune(&s)?;
        stream_both_ways(&s, args.bytes / 4, args.msg)?;
        stream_both_ways(&s, args.bytes, args.msg)?;
        return Ok(ExitCode::SUCCESS);
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let mut child = std::process::Command::new(std::env::current_exe()?)
        .args([
            "__loopback",
            "--bytes",
            &args.bytes.to_string(),
            "--msg",
            &args.msg.to_string(),
            "--connect",
            &port.to_string(),
        ])
        .spawn()?;
    let (s, _) = listener.accept()?;
    crate::comm::cpu::net::tune(&s)?;
    // Warm: the windows opened and the buffers touched before the clock starts.
    stream_both_ways(&s, args.bytes / 4, args.msg)?;
    let t0 = std::time::Instant::now();
    stream_both_ways(&s, args.bytes, args.msg)?;
    let secs = t0.elapsed().as_secs_f64();
    child.wait()?;
    println!(
        "{}",
        serde_json::json!({"bytes": args.bytes, "msg": args.msg, "seconds": secs, "per_direction_gbps": args.bytes as f64 / secs / 1e9})
    );
    Ok(ExitCode::SUCCESS)
}
