//! Every parser that reads what somebody else wrote, fed damaged and random input: real samples
//! (the NCCL logs, flight-recorder dumps, lessons, quiz blocks, scenario files and progress files
//! the project ships or writes) with bytes replaced, inserted, deleted and cut short, and plain
//! random bytes. Each must answer (a value or an error naming the input), never panic or hang.
//! A bounded run (3 000 to 10 000 cases per parser in the slow tier that CI runs, an eighth of
//! that in a plain `cargo test`: see `common::slow_tier`) runs with every `cargo test`;
//! `PROPTEST_CASES=1000000 cargo test --test it fuzz_` runs longer.
//! (cargo-fuzz needs a nightly toolchain, which this project's machines do not have, so the
//! fuzzing is proptest's: mutations of real samples and random bytes, no coverage guidance.) A crash found is kept as a
//! regression case in fuzz_parsers.proptest-regressions beside this file.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::sample::Index;

/// One damage to a sample: (where, byte, what: 0 replace, 1 insert, 2 delete, 3 cut there).
type Edit = (Index, u8, u8);

fn damage(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for (at, byte, what) in edits {
        if b.is_empty() {
            b.push(*byte);
            continue;
        }
        let i = at.index(b.len());
        match what % 4 {
            0 => b[i] = *byte,
            1 => b.insert(i, *byte),
            2 => {
                b.remove(i);
            }
            _ => b.truncate(i),
        }
    }
    b
}

/// Samples from `dir` (recursively) whose names end in one of `exts`.
fn samples(dir: &str, exts: &[&str]) -> Vec<(PathBuf, Vec<u8>)> {
    fn walk(d: &Path, exts: &[&str], out: &mut Vec<(PathBuf, Vec<u8>)>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, exts, out);
            } else if exts.iter().any(|e| p.to_string_lossy().ends_with(e))
                && let Ok(bytes) = std::fs::read(&p)
            {
                out.push((p, bytes));
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(dir),
        exts,
        &mut out,
    );
    assert!(!out.is_empty(), "no samples in {dir}");
    out
}

/// A damaged sample or random bytes.
fn input(seeds: Vec<(PathBuf, Vec<u8>)>) -> impl Strategy<Value = (String, Vec<u8>)> {
    let n = seeds.len();
    prop_oneof![
        4 => (0..n, prop::collection::vec((any::<Index>(), any::<u8>(), any::<u8>()), 0..24))
            .prop_map(move |(i, edits)| {
                let (p, b) = &seeds[i];
                (p.display().to_string(), damage(b, &edits))
            }),
        1 => prop::collection::vec(any::<u8>(), 0..2048)
            .prop_map(|b| ("random".to_string(), b)),
    ]
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(crate::common::cases(cases)),
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::SourceParallel("proptest-regressions"),
        )),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(10_000))]

    /// `doctor --log`: NCCL_DEBUG=INFO lines as any rank may have written them.
    #[test]
    fn fuzz_nccl_logs((name, bytes) in input(samples("tests/fixtures/nccl_logs", &[".log"]))) {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        for line in text.lines() {
            let _ = ringlab::nccl_log::parse_line(line);
        }
        let _ = ringlab::lab::doctor::analyze(&[(name, text)]);
    }

    /// `doctor --bench`: nccl-tests' output (every release's table) as pasted from a thread.
    #[test]
    fn fuzz_bench_outputs((name, bytes) in input(samples("tests/fixtures/nccl-tests", &[".txt"]))) {
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(f) = ringlab::lab::doctor::bench::read(&name, &text) {
            let found = ringlab::lab::doctor::bench::findings(&f, Some(&ringlab::collective::LINK_PRESETS[2]));
            let _ = ringlab::lab::doctor::bench::render(&f, None, &found);
        }
    }

    /// Quiz blocks as a lesson author may have typed them.
    #[test]
    fn fuzz_quiz_blocks((_, bytes) in input(quiz_bodies())) {
        let _ = ringlab::course::quiz::parse(&String::from_utf8_lossy(&bytes));
    }

    /// Scenario files (`labs/*.toml`, or one a learner writes).
    #[test]
    fn fuzz_scenario_files((_, bytes) in input(samples("labs", &[".toml"]))) {
        let _ = ringlab::lab::hang::scenario::parse(&String::from_utf8_lossy(&bytes));
    }

    /// The hello every connection opens with, and the store's length-prefixed frames.
    #[test]
    fn fuzz_wire_hello_and_frames(bytes in prop::collection::vec(any::<u8>(), 0..512), good in any::<bool>()) {
        use ringlab::comm::cpu::wire::{Hello, MAX_FRAME, Role, read_frame};
        let token = [7u8; 16];
        let mut b = bytes.clone();
        if good {
            // A valid hello first, so the frames behind it are read too.
            let hello = Hello { token, role: Role::Store, rank: 0 }.encode();
            b.splice(0..0, hello);
        }
        let mut r = &b[..];
        if Hello::read_checked(&mut r, &token).is_ok() {
            while let Ok(f) = read_frame(&mut r) {
                prop_assert!(f.len() <= MAX_FRAME);
            }
        }
    }
}

proptest! {
    #![proptest_config(config(3_000))]

    /// Lessons: front matter, blocks and math, checked as `ringlab check` does.
    #[test]
    fn fuzz_lessons((name, bytes) in input(samples("lessons", &[".md"]))) {
        use ringlab::course::lesson::SourceFile;
        let file = SourceFile { path: name, text: String::from_utf8_lossy(&bytes).into_owned() };
        let _ = ringlab::course::lesson::parse_lesson(&file);
        let diags = ringlab::course::check::check_sources(std::slice::from_ref(&file));
        for d in diags {
            prop_assert!(!d.to_string().is_empty());
        }
    }

    /// Flight-recorder dumps: ringlab's JSON and PyTorch's pickles, read from files as
    /// `doctor --trace` reads them.
    #[test]
    fn fuzz_flight_recorder_dumps((name, bytes) in input(samples("tests/fixtures/flight-recorder", &[".json", ".pkl"]))) {
        let dir = tempfile::tempdir().expect("tempdir");
        let ext = if name.ends_with(".pkl") { "rank0.pkl" } else { "rank0.json" };
        let path = dir.path().join(ext);
        std::fs::write(&path, &bytes).expect("write");
        if let Ok(traces) = ringlab::lab::hang::trace::read_paths(&[path]) {
            let _ = ringlab::lab::hang::trace::analyse(&traces);
        }
    }

    /// Progress files: a corrupt one is reported and kept, never overwritten or a panic.
    #[test]
    fn fuzz_progress_files((_, bytes) in input(progress_samples())) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(ringlab::study::progress::FILE_NAME);
        std::fs::write(&path, &bytes).expect("write");
        let _ = ringlab::study::progress::read_file(&path);
        if ringlab::study::progress::load(dir.path()).is_ok() {
            // A file load did not accept was moved aside, not lost: its bytes are still here.
            let kept = std::fs::read_dir(dir.path())
                .expect("read_dir")
                .flatten()
                .any(|e| std::fs::read(e.path()).is_ok_and(|b| b == bytes));
            prop_assert!(kept || bytes.is_empty());
        }
    }
}

/// The bodies of every quiz block in the shipped lessons and drills.
fn quiz_bodies() -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for (p, b) in samples("lessons", &[".md"]) {
        let text = String::from_utf8_lossy(&b).into_owned();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("```quiz") {
            let body = &rest[i + 7..];
            let end = body.find("\n```").unwrap_or(body.len());
            out.push((p.clone(), body.as_bytes()[..end].to_vec()));
            rest = &body[end..];
        }
    }
    assert!(out.len() > 20, "quiz blocks found: {}", out.len());
    out
}

/// A real progress file, written by the app's own save.
fn progress_samples() -> Vec<(PathBuf, Vec<u8>)> {
    use ringlab::study::progress;
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut p, _) = progress::load(dir.path()).expect("fresh");
    let now = chrono::Utc::now();
    p.note_reading("collectives", 1.0, now);
    p.note_reading("ring-allreduce", 0.5, now);
    progress::save(dir.path(), &mut p).expect("save");
    let path = dir.path().join(progress::FILE_NAME);
    vec![(path.clone(), std::fs::read(&path).expect("saved"))]
}

/// The store behind every rendezvous, fed garbage after a valid hello on many connections:
/// it drops each bad peer and still serves a good client.
#[test]
fn fuzz_the_store_keeps_serving_after_garbage() {
    use ringlab::comm::cpu::store::{StoreClient, StoreServer};
    use ringlab::comm::cpu::wire::{Hello, Role};
    use std::io::Write;
    let token = [9u8; 16];
    let server = StoreServer::start("127.0.0.1:0".parse().expect("addr"), token).expect("store");
    let mut runner = proptest::test_runner::TestRunner::new(config(300));
    runner
        .run(
            &(prop::collection::vec(any::<u8>(), 0..600), any::<bool>()),
            |(bytes, framed)| {
                let mut c = std::net::TcpStream::connect(server.addr()).expect("connect");
                let mut msg = Hello {
                    token,
                    role: Role::Store,
                    rank: 1,
                }
                .encode()
                .to_vec();
                if framed {
                    msg.extend((bytes.len() as u32).to_le_bytes());
                }
                msg.extend(&bytes);
                let _ = c.write_all(&msg);
                Ok(())
            },
        )
        .expect("no case fails");
    let mut client = StoreClient::connect(server.addr(), &token, 0).expect("a good client");
    client.set("k", "v").expect("set");
    assert_eq!(
        client
            .get("k", std::time::Duration::from_secs(5))
            .expect("get"),
        "v"
    );
}
