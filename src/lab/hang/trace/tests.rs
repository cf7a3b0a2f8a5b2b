use super::*;

fn call(count: u64) -> Call {
    Call {
        coll: "all-reduce".into(),
        algo: "ring".into(),
        count,
        dtype: "f32".into(),
        op: "sum".into(),
        root: -1,
        shape: None,
    }
}

/// `world` ranks each run `calls` (counts) and stop at `upto[r]` with state `st[r]`.
fn run(world: usize, calls: &[u64], upto: &[(usize, State)]) -> Vec<RankTrace> {
    (0..world)
        .map(|r| {
            let mut rec = Recorder::new(r, world, 8);
            let (n, st) = upto[r];
            for (i, &c) in calls.iter().enumerate().take(n) {
                let seq = rec.schedule(call(c), Some(format!("call {i}")));
                if i + 1 < n || st != State::Scheduled {
                    rec.start(seq);
                }
                if i + 1 < n || st == State::Completed {
                    rec.complete(seq);
                }
            }
            rec.dump()
        })
        .collect()
}

/// The journal replays to the recorder's own dump, across a compaction, and a last line
/// cut off mid-write is left out; a bad line is named.
#[test]
fn a_journal_replays_to_the_dump_and_survives_a_cut_off_line() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("rank1.jsonl");
    let mut j = JournalFile::create(&path, Recorder::new(1, 4, 3)).expect("create");
    for k in 0..5u64 {
        let seq = j
            .schedule(call(k + 1), Some(format!("step {k}")))
            .expect("schedule");
        j.start(seq).expect("start");
        if k < 4 {
            j.complete(seq).expect("complete");
        }
    }
    let text = std::fs::read_to_string(&path).expect("read");
    let back = parse_journal("rank1.jsonl", &text).expect("parse");
    let want = j.recorder().dump();
    assert_eq!(back.entries, want.entries);
    assert_eq!((back.rank, back.world), (1, 4));
    assert_eq!(back.entries.len(), 3, "the capacity holds");
    // Compacted, it reads the same.
    j.compact().expect("compact");
    let text2 = std::fs::read_to_string(&path).expect("read");
    assert!(text2.len() < text.len());
    assert_eq!(
        parse_journal("x", &text2).expect("parse").entries,
        want.entries
    );
    // A process killed mid-line: that event is missing, nothing else.
    let cut = format!("{text}{{\"seq\":5,\"sta");
    assert_eq!(
        parse_journal("x", &cut).expect("parse").entries,
        want.entries
    );
    // A bad line in the middle is an error naming its line.
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "{not json";
    let e = parse_journal("rank1.jsonl", &(lines.join("\n") + "\n")).expect_err("bad");
    assert!(e.to_string().starts_with("rank1.jsonl: 3:"), "{e}");
}

#[test]
fn the_recorder_keeps_the_last_entries_in_order() {
    let mut rec = Recorder::new(0, 2, 3);
    for i in 0..5 {
        let s = rec.schedule(call(i), None);
        rec.start(s);
        rec.complete(s);
    }
    let d = rec.dump();
    let seqs: Vec<u64> = d.entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [3, 4, 5]);
    assert!(d.entries.iter().all(|e| e.state == State::Completed));
    assert!(
        d.entries
            .iter()
            .all(|e| e.started_ns.is_some() && e.completed_ns >= e.started_ns)
    );
    let text = serde_json::to_string(&d).expect("json");
    assert_eq!(
        parse("x.json", &text).expect("reads back").entries,
        d.entries
    );
}

#[test]
fn the_rank_that_never_entered_is_named() {
    use State::*;
    // Ranks 0, 2, 3 are inside #5; rank 1 completed #4 and never called #5.
    let t = run(
        4,
        &[4, 4, 4, 4, 4],
        &[(5, Started), (4, Completed), (5, Started), (5, Started)],
    );
    let a = analyse(&t);
    assert_eq!(a.culprit, Some(Culprit::NeverEntered { rank: 1, seq: 5 }));
    assert!(
        a.explanation.contains("never entered #5"),
        "{}",
        a.explanation
    );
    let rows = table(&t, &a, 3);
    assert!(
        rows.iter()
            .any(|r| r.odd && r.text.starts_with("◀ #5") && r.text.contains('—')),
        "{rows:#?}"
    );
}

#[test]
fn a_different_call_at_the_same_number_is_named() {
    use State::*;
    let mut t = run(3, &[4, 4, 4], &[(3, Started), (3, Started), (3, Started)]);
    // Rank 2's #3 is a smaller all-reduce (an uneven last batch).
    t[2].entries[2].call.count = 2;
    let a = analyse(&t);
    match &a.culprit {
        Some(Culprit::Mismatch {
            rank,
            seq,
            theirs,
            others,
        }) => {
            assert_eq!((*rank, *seq), (2, 3));
            assert_eq!((theirs.count, others.count), (2, 4));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        a.explanation.contains("rank 2 is at collective #3"),
        "{}",
        a.explanation
    );
}

#[test]
fn a_stopped_rank_and_a_gone_rank_are_named() {
    use State::*;
    let mut t = run(3, &[4; 6], &[(6, Started), (4, Started), (6, Started)]);
    t[1].process = Process::Stopped;
    let a = analyse(&t);
    assert_eq!(
        a.culprit,
        Some(Culprit::StuckInside {
            rank: 1,
            seq: 4,
            stopped: true
        })
    );
    let mut t = run(3, &[4; 6], &[(6, Started), (6, Started), (3, Completed)]);
    t[2].process = Process::Gone {
        code: Some(137),
        signal: None,
    };
    let a = analyse(&t);
    assert_eq!(
        a.culprit,
        Some(Culprit::Gone {
            rank: 2,
            last_seq: Some(3)
        })
    );
    assert!(
        a.explanation.contains("exited with status 137"),
        "{}",
        a.explanation
    );
    // No dump at all from rank 2: gone as well.
    let t = run(3, &[4; 6], &[(6, Started), (6, Started), (3, Completed)]);
    let a = analyse(&t[..2]);
    assert_eq!(a.missing, [2]);
    assert_eq!(
        a.culprit,
        Some(Culprit::Gone {
            rank: 2,
            last_seq: None
        })
    );
}

#[test]
fn healthy_dumps_blame_nobody() {
    use State::*;
    let t = run(4, &[4; 10], &[(10, Completed); 4]);
    let a = analyse(&t);
    assert_eq!(a.culprit, None, "{}", a.explanation);
    // Ranks one collective apart while running (one has started #10, the others not
    // yet) is not a divergence either when nothing is stuck behind.
    let t = run(2, &[4; 10], &[(10, Started), (10, Started)]);
    assert_eq!(analyse(&t).culprit, None);
}

#[test]
fn bad_dumps_are_refused_with_the_file_and_place() {
    let e = parse("r0.json", "{\"format\": ").expect_err("truncated");
    assert!(e.to_string().starts_with("r0.json: 1:"), "{e}");
    let e = parse("r0.json", "{\"format\":\"other\"}").expect_err("other format");
    assert!(
        e.message.contains("expected `ringlab-flight-recorder`"),
        "{e}"
    );
    let e = parse(
        "r0.json",
        &format!("{{\"format\":\"{FORMAT}\",\"version\":9}}"),
    )
    .expect_err("newer");
    assert!(e.message.contains("version 9"), "{e}");
    let e = parse(
        "r0.json",
        &format!("{{\"format\":\"{FORMAT}\",\"version\":1,\"rank\":4,\"world\":2,\"entries\":[]}}"),
    )
    .expect_err("rank out of range");
    assert!(e.message.contains("rank 4 of world 2"), "{e}");
}
