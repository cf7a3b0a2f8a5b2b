use super::*;

fn one(name: &str, text: &str) -> Vec<Finding> {
    analyze(&[(name.to_string(), text.to_string())])
}

fn kinds(f: &[Finding]) -> Vec<&'static str> {
    f.iter().map(|f| f.kind.name()).collect()
}

#[test]
fn parses_nccl_lines() {
    let l = nccl_log::parse_line("n1:4711:4711 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>")
        .unwrap();
    assert_eq!(
        (l.host.as_str(), l.pid, l.text.as_str()),
        ("n1", 4711, "Bootstrap: Using eth0:10.0.0.1<0>")
    );
    assert!(nccl_log::parse_line("just some output").is_none());
}

#[test]
fn docker0_across_hosts_single_host_fine() {
    let two = "a:1:1 [0] NCCL INFO Bootstrap : Using [0]docker0:172.17.0.1<0>\n\
               b:2:2 [0] NCCL INFO Bootstrap : Using [0]docker0:172.17.0.1<0>\n";
    let f = one("x.log", two);
    assert_eq!(kinds(&f), ["local-interface"]);
    assert_eq!(f[0].evidence.len(), 2);
    let single = "a:1:1 [0] NCCL INFO Bootstrap: Using lo:127.0.0.1<0>\n";
    assert!(one("x.log", single).is_empty());
}

#[test]
fn names_differ_and_retry() {
    let t = "a:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>\n\
             b:2:2 [0] NCCL INFO Bootstrap: Using eno1:10.0.0.2<0>\n\
             b:2:2 [0] NCCL WARN socketProgress: connect to 10.0.0.1<5000> returned Connection refused, retrying (1/34) after sleep for 100 msec\n\
             b:2:2 [0] NCCL WARN socketProgress: connect to 10.0.0.1<5000> returned Connection refused, retrying (2/34) after sleep for 200 msec\n";
    let f = one("x.log", t);
    assert_eq!(kinds(&f), ["iface-names-differ", "connect-retry"]);
    assert!(f[0].fix.contains("eno1,eth0"), "{}", f[0].fix);
    assert!(f[1].summary.contains("2/34"), "{}", f[1].summary);
    assert_eq!(f[1].evidence[0].1, 3);
    assert_eq!(f[1].evidence[1].1, 4);
}

#[test]
fn subnets_differ() {
    let t = "a:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>\n\
             b:2:2 [0] NCCL INFO Bootstrap: Using eth0:192.168.5.2<0>\n";
    assert_eq!(kinds(&one("x.log", t)), ["subnets-differ"]);
}

#[test]
fn env_lines() {
    let t = "a:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ens5\n\
             a:1:1 [0] NCCL WARN Bootstrap : no socket interface found\n\
             a:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.\n\
             a:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0.\n";
    let f = one("x.log", t);
    // A set NCCL_SOCKET_IFNAME is find-or-fail: the finding names the value.
    assert_eq!(kinds(&f), ["ifname-no-match", "p2p-disabled"]);
    assert!(f[0].summary.contains("ens5"));
}

#[test]
fn retry_lines_of_every_release_parse() {
    let legacy = parse_retry(&nccl_log::parse_msg(
        "Call to connect returned Connection refused, retrying",
    ))
    .unwrap();
    assert_eq!((legacy.addr, legacy.legacy, legacy.k), (None, true, 0));
    assert_eq!(legacy.error, "Connection refused");
    let counted = parse_retry(&nccl_log::parse_msg(
        "socketPollConnect: connect returned Connection refused, retrying (3/34) after sleep for 300 msec",
    ))
    .unwrap();
    assert_eq!((counted.addr, counted.k, counted.n), (None, 3, 34));
    let named = parse_retry(&nccl_log::parse_msg(
        "socketPollConnect: connect to 10.0.0.1<5000> returned No route to host, retrying (2/34) after sleep for 200 msec",
    ))
    .unwrap();
    assert_eq!(named.addr.as_deref(), Some("10.0.0.1<5000>"));
    assert_eq!((named.error.as_str(), named.k), ("No route to host", 2));
    assert!(
        parse_retry(&nccl_log::parse_msg(
            "Call to accept returned Connection reset, retrying"
        ))
        .is_none()
    );
    assert_eq!(
        parse_give_up(&nccl_log::parse_msg(
            "socketStartConnect: exceeded retries (20000)"
        )),
        Some(None)
    );
    assert_eq!(
        parse_give_up(&nccl_log::parse_msg(
            "socketPollConnect: connect to 10.0.0.1<5000> returned Connection refused, exceeded error retry count after 35 attempts"
        )),
        Some(Some("10.0.0.1<5000>".into()))
    );
    assert_eq!(parse_give_up(&nccl_log::parse_msg("Init COMPLETE")), None);
}

fn release(text: &str) -> ReleaseGuess {
    nccl_release(&[("x.log".to_string(), text.to_string())]).expect("a guess")
}

#[test]
fn the_release_follows_the_line_shapes() {
    let r = release(
        "a:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n\
         a:1:2 [0] NCCL INFO Call to connect returned Connection refused, retrying\n",
    );
    assert!(r.consistent);
    assert!(
        r.summary.starts_with("these logs look like NCCL 2.8-2.23:"),
        "{}",
        r.summary
    );
    assert_eq!(r.evidence.len(), 2);
    let r = release("a:1:1 [0] NCCL INFO Bootstrap : Using [0]eth0:10.0.0.1<0>\n");
    assert!(r.summary.contains("NCCL 2.7 or earlier"), "{}", r.summary);
    let r = release(
        "a:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>\n\
         a:1:1 [0] NCCL INFO socketPollConnect: connect returned Connection refused, retrying (1/34) after sleep for 100 msec\n",
    );
    assert!(
        r.summary.contains("look like NCCL 2.24-2.26"),
        "{}",
        r.summary
    );
    let r = release(
        "a:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>\n\
         a:1:1 [0] NCCL INFO socketPollConnect: connect to 10.0.0.2<5000> returned Connection refused, retrying (1/34) after sleep for 100 msec\n",
    );
    assert!(
        r.summary.contains("look like NCCL 2.27 or later"),
        "{}",
        r.summary
    );
    let r = release(
        "a:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n\
         a:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n",
    );
    assert!(r.summary.contains("look like NCCL 2.21:"), "{}", r.summary);
    assert!(nccl_release(&[("x".into(), "a:1:1 [0] NCCL INFO Init COMPLETE\n".into())]).is_none());
}

#[test]
fn shapes_of_different_releases_are_called_out() {
    // One host, a 2.21 version line and a 2.24+ bootstrap line.
    let r = release(
        "a:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n\
         a:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>\n",
    );
    assert!(!r.consistent);
    assert!(
        r.summary.contains("fit no single NCCL release"),
        "{}",
        r.summary
    );
    // Two hosts, each consistent, on different releases.
    let r = release(
        "a:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n\
         b:2:2 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.2<0>\n",
    );
    assert!(!r.consistent);
    assert!(
        r.summary.contains("a looks like NCCL 2.8-2.23")
            && r.summary.contains("b looks like NCCL 2.24 or later")
            && r.summary.contains("different NCCL releases"),
        "{}",
        r.summary
    );
}

#[test]
fn legacy_retries_without_an_address_are_a_finding_with_the_give_up() {
    let t = "a:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n\
             b:2:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n\
             b:2:3 [0] NCCL INFO Call to connect returned Connection refused, retrying\n\
             b:2:3 [0] NCCL INFO Call to connect returned Connection refused, retrying\n\
             b:2:3 [0] NCCL WARN socketStartConnect: exceeded retries (20000)\n";
    let f = one("x.log", t);
    assert_eq!(kinds(&f), ["connect-retry"]);
    let s = &f[0].summary;
    assert!(s.contains("does not print"), "{s}");
    assert!(s.contains("about 2000 attempts"), "{s}");
    assert!(s.contains("gave up (ncclRemoteError)"), "{s}");
    let lines: Vec<usize> = f[0].evidence.iter().map(|e| e.1).collect();
    assert_eq!(lines, [3, 4, 5]);
    assert!(f[0].fix.contains("advertised"), "{}", f[0].fix);
}

#[test]
fn counted_retries_without_address_group_per_host_and_named_ones_win() {
    let t = "b:2:2 [0] NCCL INFO socketPollConnect: connect returned Connection refused, retrying (1/34) after sleep for 100 msec\n\
             b:2:2 [0] NCCL INFO socketPollConnect: connect returned Connection refused, retrying (2/34) after sleep for 200 msec\n\
             b:2:2 [0] NCCL WARN socketPollConnect: connect returned Connection refused, exceeded error retry count (35)\n";
    let f = one("x.log", t);
    assert_eq!(kinds(&f), ["connect-retry"]);
    assert!(f[0].summary.contains("reached 2/34"), "{}", f[0].summary);
    assert!(f[0].summary.contains("gave up"), "{}", f[0].summary);
    // A process whose lines name the address: its address-less lines add nothing.
    let t = "b:2:2 [0] NCCL INFO Call to connect returned Connection refused, retrying\n\
             b:2:2 [0] NCCL WARN socketProgress: connect to 127.0.0.1<1> returned Connection refused, retrying (1/34) after sleep for 100 msec\n";
    let f = one("x.log", t);
    assert_eq!(kinds(&f), ["connect-retry"]);
    assert!(f[0].summary.contains("127.0.0.1<1>"), "{}", f[0].summary);
}

#[test]
fn transport_lines_of_every_kind_parse() {
    let p = |m: &str| parse_transport(&nccl_log::parse_msg(m)).map(|(t, _)| t);
    assert_eq!(
        p("Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read"),
        Some(Transport::P2p)
    );
    assert_eq!(
        p("Channel 02/0 : 0[0] -> 1[1] via P2P/IPC"),
        Some(Transport::P2p)
    );
    assert_eq!(
        p("Channel 00 : 0[0] -> 1[1] via SHM/direct/direct"),
        Some(Transport::Shm)
    );
    assert_eq!(
        p("Channel 00 : 0[0] -> 1[1] via SHM/direct"),
        Some(Transport::Shm)
    );
    assert_eq!(
        p("Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA"),
        Some(Transport::Net(NetPlugin::Ib))
    );
    assert_eq!(
        p("Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0"),
        Some(Transport::Net(NetPlugin::Socket))
    );
    assert_eq!(
        p("Channel 00/0 : 1[0] -> 0[0] [send] via NET/AWS Libfabric/0"),
        Some(Transport::Net(NetPlugin::Other))
    );
    assert_eq!(p("Channel 00/24 : 0 1 2 3"), None);
    assert_eq!(p("Connected all rings, use ring PXN 0 GDR 1"), None);
    let t = transports(&[(
        "x".into(),
        "a:1:1 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA\n\
         a:1:1 [0] NCCL INFO Channel 00/0 : 6[6] -> 7[7] via P2P/CUMEM\n"
            .into(),
    )]);
    assert_eq!(
        transports_summary(&t),
        ["a: 1 P2P, 1 NET/IB (1 with GPUDirect RDMA)"]
    );
}

#[test]
fn p2p_level_loc_is_p2p_off_and_shm_alone_is_a_fallback_only_without_p2p() {
    let off = "a:1:1 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC\n\
               a:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\n";
    assert_eq!(kinds(&one("x.log", off)), ["p2p-disabled"]);
    let shm = "a:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct\n";
    assert_eq!(kinds(&one("x.log", shm)), ["shm-fallback"]);
    // A two-socket PCIe box: some pairs P2P, the pairs across sockets SHM, by design.
    let mixed = "a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n\
                 a:2:3 [1] NCCL INFO Channel 00 : 1[1] -> 2[2] via SHM/direct/direct\n";
    assert!(one("x.log", mixed).is_empty());
}

#[test]
fn the_shm_line_tells_2_30_from_earlier() {
    let r = release("a:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct\n");
    assert!(r.summary.contains("NCCL 2.30 or later"), "{}", r.summary);
    let r = release("a:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\n");
    assert!(r.summary.contains("NCCL 2.29 or earlier"), "{}", r.summary);
}

#[test]
fn a_bridge_address_on_eth0_across_hosts_is_a_container_without_host_network() {
    let t = "a:1:1 [0] NCCL INFO Bootstrap: Using eth0:172.17.0.2<0>\n\
             b:2:2 [0] NCCL INFO Bootstrap: Using eth0:172.17.0.2<0>\n";
    let f = one("x.log", t);
    assert_eq!(kinds(&f), ["container-bridge"]);
    assert!(f[0].fix.contains("--network=host"), "{}", f[0].fix);
    // One host alone: the bridge is fine for a single-node job.
    assert!(
        one(
            "x.log",
            "a:1:1 [0] NCCL INFO Bootstrap: Using eth0:172.17.0.2<0>\n"
        )
        .is_empty()
    );
}

#[test]
fn sockets_on_one_host_or_without_ib_hardware_are_no_alarm() {
    // A two-GPU desktop: no IB, every connection P2P: nothing to say.
    let desktop = "d:1:1 [0] NCCL INFO NET/IB : No device found.\n\
                   d:1:1 [0] NCCL INFO NET/Socket : Using [0]enp5s0:192.168.1.20<0>\n\
                   d:1:1 [0] NCCL INFO Using network Socket\n\
                   d:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n";
    assert!(
        one("x.log", desktop).is_empty(),
        "{:?}",
        one("x.log", desktop)
    );
    // Two cloud VMs without IB over sockets: a note at most, never an error.
    let vms = "a:1:1 [0] NCCL INFO NET/IB : No device found.\n\
               a:1:1 [0] NCCL INFO Using network Socket\n\
               b:2:2 [0] NCCL INFO NET/IB : No device found.\n\
               b:2:2 [0] NCCL INFO Using network Socket\n\
               a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n";
    let f = one("x.log", vms);
    assert_eq!(kinds(&f), ["socket-fallback"]);
    assert_eq!(f[0].severity, Severity::Note);
    assert!(!any_error(&f));
    // With IPoIB on the hosts the fallback costs: an error.
    let ipoib = vms.replace(
        "Using network Socket",
        "Using network Socket\na:1:1 [0] NCCL INFO Bootstrap : Using ib0:10.1.0.1<0>",
    );
    let f = one("x.log", &ipoib);
    assert_eq!(f[0].severity, Severity::Error, "{f:?}");
    // NCCL_IB_DISABLE=1 on a machine the log shows no IB on: a note.
    let ib_off = "a:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n";
    let f = one("x.log", ib_off);
    assert_eq!(kinds(&f), ["ib-disabled"]);
    assert_eq!(f[0].severity, Severity::Note);
}

#[test]
fn a_virtual_interface_on_a_job_across_hosts_is_named() {
    for (iface, addr) in [
        ("veth1a2b3c", "172.18.0.5"),
        ("br-5f1e2d", "172.19.0.1"),
        ("virbr0", "192.168.122.1"),
        ("lxcbr0", "10.0.3.1"),
        ("tailscale0", "100.64.0.7"),
        ("eth1", "169.254.3.4"),
    ] {
        let t = format!(
            "a:1:1 [0] NCCL INFO Bootstrap : Using {iface}:{addr}<0>\n\
             a:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0\n"
        );
        let f = one("x.log", &t);
        assert_eq!(kinds(&f), ["virtual-interface"], "{iface}");
        assert_eq!(f[0].severity, Severity::Error);
        assert!(f[0].summary.contains(iface), "{}", f[0].summary);
        // The same on a job known to be on one host is fine.
        let one_host = t.replace("nNodes 2", "nNodes 1");
        assert!(one("x.log", &one_host).is_empty(), "{iface}");
    }
}

#[test]
fn coll_lines_that_disagree_at_one_op_count_are_a_mismatch() {
    let t = "a:1:1 [0] NCCL INFO AllReduce: opCount 2a sendbuff 0x1 recvbuff 0x1 count 4096 datatype 7 op 0 root 0 comm 0x5 [nranks=4] stream 0x9\n\
             a:2:2 [1] NCCL INFO AllReduce: opCount 2a sendbuff 0x1 recvbuff 0x1 count 4096 datatype 7 op 0 root 0 comm 0x6 [nranks=4] stream 0x9\n\
             b:3:3 [0] NCCL INFO AllReduce: opCount 2a sendbuff 0x1 recvbuff 0x1 count 2048 datatype 7 op 0 root 0 comm 0x7 [nranks=4] stream 0x9\n\
             a:1:1 [0] NCCL INFO AllReduce: opCount 2b sendbuff 0x1 recvbuff 0x1 count 8 datatype 7 op 0 root 0 comm 0x5 [nranks=4] stream 0x9\n";
    let f = one("x.log", t);
    let mm: Vec<&Finding> = f
        .iter()
        .filter(|f| f.kind == Kind::CollectiveMismatch)
        .collect();
    assert_eq!(mm.len(), 1, "{f:?}");
    assert!(mm[0].summary.contains("4096") && mm[0].summary.contains("2048"));
    assert_eq!(mm[0].evidence.len(), 2, "one line per distinct call");
    // Two communicators of one size in one process (TP and DP): their opCounts run apart, and
    // different calls at one number are no mismatch.
    let two_comms = "a:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 4096 datatype 7 op 0 root 0 comm 0x5 [nranks=2] stream 0x9\n\
                     a:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 65536 datatype 7 op 0 root 0 comm 0x8 [nranks=2] stream 0x9\n";
    let f = one("x.log", two_comms);
    assert!(
        f.iter().all(|f| f.kind != Kind::CollectiveMismatch),
        "{f:?}"
    );
}

#[test]
fn different_releases_across_hosts_are_a_finding_and_one_release_is_not() {
    let t = "NCCL version 2.14.3+cuda11.7\n\
             n1:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n\
             NCCL version 2.19.3+cuda12.3\n\
             n2:2:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n";
    let f = one("x.log", t);
    assert_eq!(kinds(&f), ["versions-differ"]);
    assert!(f[0].summary.contains("n1 2.14.3") && f[0].summary.contains("n2 2.19.3"));
    let same = t.replace("2.19.3+cuda12.3", "2.14.3+cuda11.7");
    assert!(one("x.log", &same).is_empty());
}

#[test]
fn named_warnings_give_their_cause() {
    for (warn, kind) in [
        (
            "NET/IB : Got completion from peer 10.0.0.2<4242> with error 12, opcode 0, len 0, vendor err 129 (Send) localGid ::ffff:10.0.0.1 remoteGids ::ffff:10.0.0.2",
            "ib-retry-exceeded",
        ),
        (
            "NET/IB : Got completion from peer fe80::1%ib0<53249> with error 4, opcode 32564, len 32564, vendor err 81 (Send)",
            "ib-gdr-pci",
        ),
        (
            "Call to ibv_reg_mr failed with error Cannot allocate memory",
            "memlock",
        ),
        ("Failed to CUDA calloc 8388608 bytes", "cuda-oom"),
        (
            "Cuda failure 802 'system not yet initialized'",
            "fabric-manager",
        ),
        (
            "Cuda failure 'no kernel image is available for execution on the device'",
            "nccl-too-old",
        ),
        (
            "Error: failed to extend /dev/shm/nccl-WU88OE to 9637892 bytes, error: No space left on device (28)",
            "shm-too-small",
        ),
        (
            "socketProgress: Connection closed by remote peer n2<32926>",
            "peer-gone",
        ),
    ] {
        let t = format!("a:1:1 [0] misc/x.cc:1 NCCL WARN {warn}\n");
        let f = one("x.log", &t);
        assert_eq!(kinds(&f), [kind], "{warn}");
        assert_eq!(f[0].severity, Severity::Error);
        assert!(!f[0].fix.is_empty() && f[0].confirm.is_some(), "{kind}");
    }
}
