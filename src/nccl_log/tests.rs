use super::*;

fn samples() -> Vec<Msg> {
    let eth = Iface {
        name: "eth0".into(),
        addr: "10.0.0.1".into(),
        port: 0,
    };
    vec![
        Msg::Version {
            version: "2.21.5+cuda12.4".into(),
        },
        Msg::EnvSet {
            name: "NCCL_SOCKET_IFNAME".into(),
            value: "docker0".into(),
        },
        Msg::Using {
            what: UsingWhat::Bootstrap,
            ifaces: vec![eth.clone()],
        },
        Msg::Using {
            what: UsingWhat::NetSocket,
            ifaces: vec![eth],
        },
        Msg::UsingNetwork {
            name: "Socket".into(),
        },
        Msg::Init(Init {
            complete: false,
            func: "ncclCommInitRank".into(),
            comm: 0x55d0c0de,
            rank: 1,
            nranks: 2,
            dev: 0,
            bus: 0x1000,
            comm_id: 0xabcdef,
        }),
        Msg::Init(Init {
            complete: true,
            func: "ncclCommInitRank".into(),
            comm: 0x55d0c0de,
            rank: 1,
            nranks: 2,
            dev: 0,
            bus: 0x1000,
            comm_id: 0xabcdef,
        }),
        Msg::Retry(Retry {
            func: Some("socketPollConnect".into()),
            addr: Some("172.17.0.1<43215>".into()),
            error: "Connection refused".into(),
            count: Some((3, 34)),
            sleep_ms: Some(300),
        }),
        Msg::GaveUp(GaveUp {
            func: "socketPollConnect".into(),
            addr: Some("172.17.0.1<43215>".into()),
            error: Some("Connection refused".into()),
            attempts: 35,
            timeouts: false,
        }),
        Msg::ConnectFailed {
            func: "socketPollConnect".into(),
            addr: "10.0.0.9<5000>".into(),
            error: "Network is unreachable".into(),
        },
        Msg::NoSocketInterface,
        Msg::NoSubnetInterface {
            remote: "10.0.0.1<29500>".into(),
        },
        Msg::Channel(Channel {
            channel: 0,
            conn: None,
            from: 0,
            from_dev: "0".into(),
            to: 1,
            to_dev: "1".into(),
            dir: None,
            via: "SHM/direct/direct".into(),
        }),
        Msg::Channel(Channel {
            channel: 2,
            conn: Some(0),
            from: 1,
            from_dev: "1".into(),
            to: 2,
            to_dev: "0".into(),
            dir: Some("send".into()),
            via: "NET/Socket/0".into(),
        }),
        Msg::ShmFailed {
            path: "/dev/shm/nccl-AbCdEf".into(),
            bytes: 9637892,
            error: Some(("No space left on device".into(), 28)),
        },
        Msg::Tuning {
            coll: Some("AllReduce".into()),
            bytes: 1048576,
            algo: "RING".into(),
            proto: "SIMPLE".into(),
            rest: " channel{Lo..Hi}={0..15}".into(),
        },
        Msg::ErrorTrace {
            file: "misc/socket.cc".into(),
            line: 582,
            code: 6,
            errno: None,
        },
        Msg::ErrorTrace {
            file: "bootstrap.cc".into(),
            line: 88,
            code: 2,
            errno: Some("No such file or directory".into()),
        },
        Msg::Other("Connected all rings".into()),
    ]
}

#[test]
fn every_message_round_trips_in_every_release() {
    for p in PROFILES {
        for m in samples() {
            let want = m.as_printed_by(p);
            let text = m.format(p);
            assert_eq!(parse_msg(&text), want, "{p}: {text:?}");
            // Formatting what was read gives the same text back.
            assert_eq!(want.format(p), text, "{p}");
        }
    }
}

#[test]
fn whole_lines_round_trip_with_their_header() {
    let w = Writer {
        host: "n1".into(),
        pid: 4711,
        tid: 4712,
        dev: 0,
    };
    for p in PROFILES {
        for m in samples() {
            for level in [Level::Info, Level::Warn] {
                let ts = p
                    .timestamps_warn()
                    .then_some("[2026-12-03 10:11:12]")
                    .filter(|_| level == Level::Warn);
                let line = w.line(p, level, ("misc/socket.cc", 582), ts, &m);
                if level == Level::Warn {
                    assert!(line.starts_with('\n'), "{line:?}");
                }
                let parsed = parse_line(line.trim_start_matches('\n')).expect(&line);
                assert_eq!(parsed.host, "n1");
                assert_eq!((parsed.pid, parsed.tid, parsed.dev), (4711, 4712, Some(0)));
                assert_eq!(parsed.level, level);
                assert_eq!(parsed.timestamp.as_deref(), ts);
                assert_eq!(parsed.msg, m.as_printed_by(p), "{line:?}");
                if level == Level::Warn {
                    assert_eq!(parsed.place, Some(("misc/socket.cc".into(), 582)));
                }
            }
        }
    }
}

#[test]
fn real_2_28_lines_are_read_right() {
    // Shaped as NCCL 2.28.9 writes them (src/debug.cc, src/misc/socket.cc at v2.28.9-1).
    let warn = "[2026-12-03 10:11:12] gpu-b:2201:2290 [3] misc/socket.cc:582 NCCL WARN socketPollConnect: connect to 10.0.0.1<35785> returned Connection refused, exceeded error retry count after 35 attempts";
    let l = parse_line(warn).unwrap();
    assert_eq!(l.host, "gpu-b");
    assert_eq!(l.dev, Some(3));
    assert_eq!(l.timestamp.as_deref(), Some("[2026-12-03 10:11:12]"));
    assert!(matches!(&l.msg, Msg::GaveUp(g) if g.attempts == 35));
    assert_eq!(l.releases().unwrap().1, Releases::new(27, Releases::OPEN));
    let trace = parse_line("gpu-b:2201:2290 [3] NCCL INFO misc/socket.cc:677 -> 6").unwrap();
    assert_eq!(
        trace.msg,
        Msg::ErrorTrace {
            file: "misc/socket.cc".into(),
            line: 677,
            code: 6,
            errno: None
        }
    );
    // A launcher's prefix does not hide the host.
    let l = parse_line("[default0]:gpu-a:11:12 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>")
        .unwrap();
    assert_eq!(l.host, "gpu-a");
    // The bare banner.
    let b = parse_line("NCCL version 2.21.5+cuda12.4").unwrap();
    assert_eq!(b.level, Level::Version);
    assert_eq!(b.releases().unwrap().1, Releases::new(21, 21));
    // An empty line (a WARN's first) and a program's own output are not NCCL's.
    assert!(parse_line("").is_none());
    assert!(parse_line("loss 0.25").is_none());
}

#[test]
fn subsystems_parse_like_nccl() {
    use subsys::*;
    assert_eq!(subsys::parse("INIT,net"), INIT | NET);
    assert_eq!(subsys::parse("^INIT"), ALL & !INIT);
    assert_eq!(subsys::parse("bogus"), 0);
    let p = Profile::V2_21;
    let b = Msg::Using {
        what: UsingWhat::Bootstrap,
        ifaces: vec![],
    };
    assert_ne!(b.subsys(p) & p.default_subsys(), 0);
    assert_eq!(b.subsys(Profile::NEWEST), BOOTSTRAP);
}
