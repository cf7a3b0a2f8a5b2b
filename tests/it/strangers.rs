//! Another user on this host cannot join a job (issue 47, finding H3): the store and every
//! rank's listener admit a connection from this host only when the kernel says the same uid
//! owns its other end (`ringlab::comm::cpu::owner`, read from /proc/net/tcp). As root the test
//! connects as `nobody` for real; without root it checks what it can: its own connection is
//! admitted, and the table line of another uid is read as that uid.

use std::net::TcpListener;
use std::process::Command;

#[test]
fn a_connection_another_uid_owns_is_refused_and_ones_own_admitted() {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    let own = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let (s, _) = l.accept().expect("accept");
    ringlab::comm::cpu::owner::check(&s).expect("one's own connection is admitted");
    drop((own, s));
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        // Not root: no second account to connect as. What the check reads for one, from a
        // table as the kernel writes it, is tested in the module (uid_in).
        return;
    }
    // As nobody: bash's /dev/tcp connects and holds the connection until told to go.
    let mut stranger = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "bash",
            "-c",
            &format!("exec 3<>/dev/tcp/127.0.0.1/{port}; read -t 30 -u 3 x"),
        ])
        .spawn()
        .expect("setpriv");
    let (s, _) = l.accept().expect("accept the stranger");
    let e = ringlab::comm::cpu::owner::check(&s).expect_err("another uid is refused");
    assert!(e.to_string().contains("uid 65534"), "{e}");
    drop(s);
    let _ = stranger.wait();
}

/// Under a launcher across hosts, a token derived from the launcher's public variables keeps
/// no stranger out: without RINGLAB_TOKEN, and without rank 0's private token file in a home
/// it shares, the rank refuses to start, naming the ways on, and `--insecure-token` runs
/// anyway with a warning.
#[test]
fn a_job_across_hosts_needs_a_secret_token() {
    let home = tempfile::tempdir().expect("home");
    // Rank 1 of 2, one per node: rank 0 (never started) would be on another host.
    let run = |extra: &[&str]| {
        let mut args = vec!["sanity", "--backend", "tcp", "--timeout", "2"];
        args.extend_from_slice(extra);
        crate::common::torchrun_rank(&args, 1, true, 29977)
            .env("RINGLAB_HOME", home.path())
            .output()
            .expect("run")
    };
    let out = run(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("RINGLAB_TOKEN") && err.contains("--insecure-token"),
        "{err}"
    );
    let out = run(&["--insecure-token"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("warning: --insecure-token"), "{err}");
}

/// Two ranks, each a node of its own, sharing a home as cluster nodes do, and no RINGLAB_TOKEN:
/// rank 0 writes a fresh token to a file only its user can read, rank 1 reads it, and the job
/// runs (issue 47 item 3).
#[test]
fn ranks_across_hosts_share_rank_0s_private_token_file() {
    let home = tempfile::tempdir().expect("home");
    let port = (21000 + std::process::id() % 20000) as u16;
    let rank = |r: usize| {
        crate::common::torchrun_rank(
            &["sanity", "--backend", "tcp", "--timeout", "30"],
            r,
            true,
            port,
        )
        .env("RINGLAB_HOME", home.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn")
    };
    let zero = rank(0);
    let one = rank(1);
    let (zero, one) = (
        zero.wait_with_output().expect("rank 0"),
        one.wait_with_output().expect("rank 1"),
    );
    for (r, o) in [(0, &zero), (1, &one)] {
        assert!(
            o.status.success(),
            "rank {r}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let jobs = home.path().join("jobs");
    let files: Vec<_> = std::fs::read_dir(&jobs).expect("jobs").flatten().collect();
    assert_eq!(files.len(), 1, "one token file");
    use std::os::unix::fs::PermissionsExt;
    let mode = files[0].metadata().expect("meta").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "only its user can read it");
}
