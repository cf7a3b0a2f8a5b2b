#[test]
fn the_nccl_labs_retries_outlast_the_watchdog_as_the_docs_say() {
    use crate::comm::cpu::net::Retrier;
    let env = NcclLab::lab_env();
    let get = |k: &str| -> u64 {
        env.iter()
            .find(|(n, _)| n == k)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or_else(|| panic!("{k} in {env:?}"))
    };
    let minute = Duration::from_secs(60);
    let (total, first_minute) = Retrier::counted_schedule(
        get("NCCL_SOCKET_RETRY_CNT"),
        get("NCCL_SOCKET_RETRY_SLEEP_MSEC"),
        minute,
    );
    // README and NcclLab::lab_env: 109 tries in the first minute, about 83 minutes in all.
    assert_eq!(first_minute, 109);
    assert_eq!(total.as_secs() / 60, 83);
    // NCCL's default: 34 tries, about 60 s, after which it gives up by itself.
    let (default_total, _) = Retrier::counted_schedule(34, 100, minute);
    assert_eq!(default_total.as_millis(), 59_500);
}
use super::*;

#[test]
fn every_shipped_scenario_parses() {
    let (ok, bad) = all();
    assert!(bad.is_empty(), "{bad:?}");
    let names: Vec<&str> = ok.iter().map(|s| s.name.as_str()).collect();
    for n in [
        "docker0",
        "exclude-docker-picks-lo",
        "lo-across-nodes",
        "iface-names-differ",
        "wrong-master-addr",
        "missing-rank",
        "silent-drop",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
}

/// A blind class sees the brief: it must not name the setting that was staged, nor the
/// fix; and no fix choice stands out by being the only one described.
#[test]
fn briefs_do_not_give_the_cause_away_and_choices_read_alike() {
    let words = |t: &str| -> Vec<String> {
        t.to_lowercase()
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .filter(|w| !w.is_empty())
            .map(|w| w.trim_end_matches('.').to_string())
            .collect()
    };
    for s in all().0 {
        let brief = words(&s.brief);
        assert!(!s.brief.contains("NCCL_"), "{}: {}", s.name, s.brief);
        let master: Vec<String> = s.stage_master_addr.iter().map(|a| a.to_string()).collect();
        let staged = s
            .stage_env
            .values()
            .chain(s.fix.env.values())
            .chain(master.iter())
            .flat_map(|v| {
                v.split([',', '^'])
                    .map(str::to_lowercase)
                    .collect::<Vec<_>>()
            })
            .filter(|v| !v.is_empty());
        for v in staged {
            assert!(!brief.contains(&v), "{}: brief names `{v}`", s.name);
        }
        for c in fix_choices(&s) {
            let (what, how) = c.text.split_once(": ").unwrap_or(("", ""));
            assert!(
                !what.is_empty() && !how.is_empty(),
                "{}: choice `{}` is not `what it does: the setting`",
                s.name,
                c.text
            );
        }
    }
}

/// The culprit, the expected outcome and the staged master address are typed: a typo in
/// a scenario file is an error at its line when the file is loaded, not a run that can
/// never match.
#[test]
fn scenario_fields_are_typed_and_checked_at_load() {
    let good = |extra: &str| {
        format!(
            "name = \"x\"\ntitle = \"t\"\nstory = \"s\"\nbrief = \"b\"\nnodes = 2\n\
             ranks_per_node = 1\ntimeout = 6\nsymptom = \"y\"\nhints = []\n{extra}\n\
             [fix]\ntext = \"f\"\n"
        )
    };
    let s = parse(&good(
        "expect = \"hang\"\nculprit = \"missing-rank\"\nstage_master_addr = \"10.0.0.9\"",
    ))
    .expect("parses");
    assert_eq!(s.culprit, Culprit::MissingRank);
    assert_eq!(s.expect, Expect::Hang);
    assert_eq!(s.stage_master_addr, Some("10.0.0.9".parse().expect("ip")));
    let e = parse(&good("expect = \"hang\"\nculprit = \"missing-rnak\""))
        .expect_err("typo in the culprit")
        .to_string();
    assert!(e.starts_with("11:") && e.contains("missing-rnak"), "{e}");
    let e = parse(&good("expect = \"stall\"\nculprit = \"unknown\""))
        .expect_err("bad outcome")
        .to_string();
    assert!(e.starts_with("10:") && e.contains("stall"), "{e}");
    let e = parse(&good(
        "expect = \"hang\"\nculprit = \"unknown\"\nstage_master_addr = \"10.0.0.999\"",
    ))
    .expect_err("not an address")
    .to_string();
    assert!(e.starts_with("12:"), "{e}");
    for c in Culprit::ALL {
        assert_eq!(Culprit::from_id(c.id()), c);
    }
}

#[test]
fn the_event_stream_is_one_typed_object_per_line() {
    let line = StreamLine::Error("no namespaces".into()).to_line();
    assert_eq!(line, r#"{"error":"no namespaces"}"#);
    let m = StreamLine::Msg(Msg::Log {
        rank: 1,
        line: "NCCL INFO x".into(),
    });
    let back: StreamLine = serde_json::from_str(&m.to_line()).expect("round trip");
    assert_eq!(back, m);
    assert!(m.to_line().starts_with(r#"{"msg":"#), "{}", m.to_line());
    assert!(serde_json::from_str::<StreamLine>(r#"{"bogus":1}"#).is_err());
}

#[test]
fn a_bad_scenario_names_the_line() {
    let e = parse("name = \"x\"\nnodes = \"two\"\n")
        .expect_err("bad")
        .to_string();
    assert!(e.starts_with("2:"), "{e}");
}

fn logs(per_rank: &[&[&str]]) -> BTreeMap<usize, Vec<String>> {
    per_rank
        .iter()
        .enumerate()
        .map(|(r, ls)| (r, ls.iter().map(|l| l.to_string()).collect()))
        .collect()
}

/// NCCL 2.28-shaped logs of a two-node run (each node its own host, as the namespace
/// nodes are) name the culprit through `doctor --log`'s analyser.
#[test]
fn nccls_own_log_names_the_culprit_of_each_scenario() {
    let docker0 = logs(&[
        &[
            "n0:101:101 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to docker0",
            "n0:101:101 [0] NCCL INFO Bootstrap: Using docker0:172.17.0.1<0>",
            "n0:101:101 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>",
        ],
        &[
            "n1:202:202 [0] NCCL INFO Bootstrap: Using docker0:172.17.0.1<0>",
            "n1:202:202 [0] NCCL INFO socketPollConnect: connect to 172.17.0.1<40163> returned Connection refused, retrying (3/1000) after sleep for 30 msec",
        ],
    ]);
    let (c, why, lines) = nccl_culprit(1, &docker0).expect("a culprit");
    assert_eq!(c, Culprit::UnroutableAddress);
    assert!(
        why.contains("docker0") && why.contains("172.17.0.1"),
        "{why}"
    );
    assert!(!lines.is_empty());
    let adv = nccl_advertised(&docker0);
    assert_eq!(adv[&0], "172.17.0.1 (docker0)");

    let names = logs(&[
        &["n0:101:101 [0] NCCL INFO Bootstrap: Using eth0:10.77.0.1<0>"],
        &[
            "n1:202:202 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
            "[2026-12-03 10:11:12] n1:202:202 [0] bootstrap.cc:114 NCCL WARN Bootstrap : no socket interface found",
        ],
    ]);
    assert_eq!(
        nccl_culprit(1, &names).expect("culprit").0,
        Culprit::IfaceNotFound
    );

    let dropped = logs(&[
        &["n0:101:101 [0] NCCL INFO Bootstrap: Using eth0:10.77.0.1<0>"],
        &[
            "n1:202:202 [0] NCCL INFO Bootstrap: Using eth0:10.77.0.2<0>",
            "n1:202:202 [0] NCCL INFO socketPollConnect: connect to 10.77.0.1<41877> returned Connection timed out, retrying (1/1000) after sleep for 10 msec",
        ],
    ]);
    assert_eq!(
        nccl_culprit(1, &dropped).expect("culprit").0,
        Culprit::ConnectionDropped
    );

    let healthy = logs(&[
        &["n0:101:101 [0] NCCL INFO Bootstrap: Using eth0:10.77.0.1<0>"],
        &["n1:202:202 [0] NCCL INFO Bootstrap: Using eth0:10.77.0.2<0>"],
    ]);
    assert_eq!(
        nccl_culprit(1, &healthy),
        None,
        "a healthy log names nothing"
    );
}

/// A run's flight-recorder folder older than a day is removed by the next run (L10); one
/// younger is kept for `doctor --trace`.
#[test]
fn flight_recorder_folders_age_out() {
    let base = std::path::Path::new("/dev/shm");
    if !base.is_dir() {
        return;
    }
    let old = base.join(format!("ringlab-trace-agetest-old-{}", std::process::id()));
    let young = base.join(format!(
        "ringlab-trace-agetest-young-{}",
        std::process::id()
    ));
    for d in [&old, &young] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let touched = std::process::Command::new("touch")
        .args(["-d", "2 days ago"])
        .arg(&old)
        .status()
        .expect("touch");
    assert!(touched.success());
    let dir = run::fresh_trace_dir("agetest").expect("a fresh folder");
    assert!(!old.exists(), "a two-day-old folder is gone");
    assert!(young.exists(), "a new one is kept");
    for d in [&young, &dir] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// A slow scenario's bad links are refused with where and why: a rate of 0, an unreadable
/// rate, a node outside the cluster, a [slow] section on a scenario that expects a hang.
#[test]
fn slow_scenarios_refuse_bad_links_by_line() {
    let base = |expect: &str, slow: &str| {
        format!(
            "name = \"x\"\ntitle = \"t\"\nstory = \"s\"\nbrief = \"b\"\nnodes = 3\nranks_per_node = 1\n\
             timeout = 5\nexpect = \"{expect}\"\nsymptom = \"y\"\nculprit = \"slow-link\"\nhints = []\n\
             {slow}\n[fix]\ntext = \"f: x\"\nunshape = 1\n"
        )
    };
    let ok = base(
        "slow",
        "[slow]\nbytes = 1024\nshape = [{ node = 1, iface = \"eth0\", rate = \"200mbit\" }]",
    );
    let s = parse(&ok).expect("a good slow scenario");
    assert_eq!(s.culprit, Culprit::SlowLink);
    let zero = base(
        "slow",
        "[slow]\nbytes = 1024\nshape = [{ node = 1, iface = \"eth0\", rate = \"0mbit\" }]",
    );
    let e = parse(&zero).expect_err("rate 0").to_string();
    assert!(e.starts_with("14:") && e.contains("above 0"), "{e}");
    let nonsense = base(
        "slow",
        "[slow]\nbytes = 1024\nshape = [{ iface = \"eth0\", rate = \"fast\" }]",
    );
    let e = parse(&nonsense).expect_err("unreadable").to_string();
    assert!(e.contains("not a rate") && e.contains("500mbit"), "{e}");
    let outside = base(
        "slow",
        "[slow]\nbytes = 1024\nshape = [{ node = 3, iface = \"eth0\", rate = \"1gbit\" }]",
    );
    assert_eq!(
        parse(&outside),
        Err(ScenarioParseError::ShapeOutside { node: 3, nodes: 3 })
    );
    let hang = base("hang", "[slow]\nbytes = 1024");
    assert_eq!(parse(&hang), Err(ScenarioParseError::SlowNotExpected));
    let bare = base("slow", "");
    assert_eq!(parse(&bare), Err(ScenarioParseError::SlowWithoutStaging));
}

/// The slow scenarios' wrong fixes read like the right one, and the right one is never the
/// first choice.
#[test]
fn slow_fix_choices_put_the_right_one_after_a_wrong_one() {
    for s in all().0.into_iter().filter(Scenario::slow_job) {
        let v = fix_choices(&s);
        assert!(v.len() >= 4, "{}", s.name);
        assert_ne!(v[0], s.fix, "{}", s.name);
        assert_eq!(v.iter().filter(|f| **f == s.fix).count(), 1, "{}", s.name);
        // Where the fix is one node's link, every node's link is a choice, each once.
        if s.fix.unshape.is_some() {
            for n in 0..s.nodes {
                let hits: Vec<&Fix> = v.iter().filter(|f| f.unshape == Some(n)).collect();
                assert_eq!(hits.len(), 1, "{}: node {n}", s.name);
                assert!(
                    hits[0].text.contains(&format!("node {n}")),
                    "{}",
                    hits[0].text
                );
            }
        }
    }
}
