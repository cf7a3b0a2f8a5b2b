use super::*;

/// Done means read to the end and the quiz passed: paging to the end alone is "read".
#[test]
fn a_lesson_is_done_when_read_and_its_quiz_passed() {
    use crate::course::grade::SelfGrade;
    let mut p = Progress::default();
    let now = Utc::now();
    let quiz = vec!["q1".to_string(), "q2".to_string()];
    assert_eq!(p.lesson_state("ring", &quiz), LessonMark::New);
    p.note_reading("ring", 1.0, now);
    assert_eq!(p.lesson_state("ring", &quiz), LessonMark::Read);
    p.record_review("q1", SelfGrade::Good, Some(true), "quiz", None, now);
    p.record_review("q2", SelfGrade::Again, Some(false), "quiz", None, now);
    assert_eq!(
        p.lesson_state("ring", &quiz),
        LessonMark::Read,
        "q2 was wrong"
    );
    let later = now + chrono::Duration::minutes(5);
    p.record_review("q2", SelfGrade::Good, Some(true), "quiz", None, later);
    assert_eq!(p.lesson_state("ring", &quiz), LessonMark::Done);
    // A self-graded recall item passes at Good or Easy, not at Hard.
    p.record_review("q1", SelfGrade::Hard, None, "quiz", None, later);
    assert_eq!(p.lesson_state("ring", &quiz), LessonMark::Read);
    // No quiz: read is done.
    assert_eq!(p.lesson_state("ring", &[]), LessonMark::Done);
}

#[test]
fn round_trip_and_marks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut p = Progress::default();
    let now = Utc::now();
    assert!(p.note_reading("collectives", 0.5, now));
    assert!(
        !p.note_reading("collectives", 0.4, now),
        "reading less is no news"
    );
    p.note_reading("ring", 1.0, now);
    save(dir.path(), &mut p).expect("save");
    let (q, notice) = load(dir.path()).expect("load");
    assert_eq!(notice, None);
    assert_eq!(q, p);
    assert_eq!(q.lesson_state("collectives", &[]), LessonMark::Started);
    assert_eq!(q.lesson_state("ring", &[]), LessonMark::Done);
    assert_eq!(q.lesson_state("tp", &[]), LessonMark::New);
}

#[test]
fn corrupt_progress_file_is_quarantined_not_overwritten() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join(FILE_NAME), "{ not json").expect("write");
    let (p, notice) = load(dir.path()).expect("load");
    assert_eq!(p, Progress::default());
    let Some(LoadNotice::Quarantined { moved_to, reason }) = notice else {
        panic!("expected quarantine")
    };
    assert!(reason.contains("corrupt"));
    assert_eq!(fs::read_to_string(moved_to).expect("kept"), "{ not json");
    assert!(!dir.path().join(FILE_NAME).exists());
}

#[test]
fn newer_schema_is_quarantined() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(
        dir.path().join(FILE_NAME),
        r#"{"schema": 99, "lessons": {}}"#,
    )
    .expect("write");
    let (_, notice) = load(dir.path()).expect("load");
    assert!(
        matches!(notice, Some(LoadNotice::Quarantined { reason, .. }) if reason.contains("newer"))
    );
}

#[test]
fn empty_progress_file_is_quarantined() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join(FILE_NAME), "").expect("write");
    let (p, notice) = load(dir.path()).expect("load");
    assert_eq!(p, Progress::default());
    assert!(matches!(notice, Some(LoadNotice::Quarantined { .. })));
}

#[test]
fn schema_1_file_is_migrated_keeping_lessons_and_a_backup() {
    let dir = tempfile::tempdir().expect("tempdir");
    let v1 = r#"{
  "schema": 1,
  "lessons": {
"collectives": {
  "read": 0.5,
  "first_opened": "2025-01-02T03:04:05Z",
  "last_opened": "2025-01-03T03:04:05Z"
}
  }
}"#;
    fs::write(dir.path().join(FILE_NAME), v1).expect("write");
    let (mut p, notice) = load(dir.path()).expect("load");
    assert_eq!(p.schema, SCHEMA);
    assert_eq!(p.lesson_state("collectives", &[]), LessonMark::Started);
    assert!(p.items.is_empty());
    let Some(LoadNotice::Migrated {
        from: 1,
        backup: Some(b),
    }) = notice
    else {
        panic!("expected a migration notice, got {notice:?}")
    };
    assert_eq!(fs::read_to_string(b).expect("backup"), v1);
    // Saved again, it loads as schema 2 with no notice.
    save(dir.path(), &mut p).expect("save");
    let (q, notice) = load(dir.path()).expect("load");
    assert_eq!((q, notice), (p, None));
}

fn record(at: &str, grade: u8, due: &str) -> ItemRecord {
    let at: DateTime<Utc> = at.parse().expect("time");
    ItemRecord {
        card: CardState {
            due: due.parse().expect("time"),
            stability: 1.0,
            difficulty: 5.0,
            elapsed_days: 0,
            scheduled_days: 1,
            reps: 1,
            lapses: 0,
            phase: CardPhase::Review,
            last_review: Some(at),
        },
        reviews: vec![Review {
            at,
            grade,
            correct: None,
            mode: "drill".into(),
            seconds: None,
        }],
    }
}

#[test]
fn merge_keeps_the_newer_review_per_item() {
    let mut mine = Progress::default();
    mine.items.insert(
        "a".into(),
        record("2025-01-01T00:00:00Z", 3, "2025-01-05T00:00:00Z"),
    );
    mine.items.insert(
        "b".into(),
        record("2025-02-01T00:00:00Z", 4, "2025-03-01T00:00:00Z"),
    );
    let mut theirs = Progress::default();
    theirs.items.insert(
        "a".into(),
        record("2025-01-10T00:00:00Z", 1, "2025-01-10T00:01:00Z"),
    );
    theirs.items.insert(
        "b".into(),
        record("2025-01-15T00:00:00Z", 3, "2025-01-20T00:00:00Z"),
    );
    theirs.items.insert(
        "c".into(),
        record("2025-01-15T00:00:00Z", 3, "2025-01-20T00:00:00Z"),
    );
    let r = mine.merge(&theirs);
    assert_eq!((r.added, r.updated, r.kept), (1, 1, 1));
    let a = &mine.items["a"];
    assert_eq!(
        a.card.due,
        "2025-01-10T00:01:00Z".parse::<DateTime<Utc>>().expect("t")
    );
    assert_eq!(a.reviews.len(), 2);
    assert!(a.reviews[0].at < a.reviews[1].at, "history stays in order");
    assert_eq!(
        mine.items["b"].card.due,
        "2025-03-01T00:00:00Z".parse::<DateTime<Utc>>().expect("t")
    );
    // Merging the same file twice changes nothing more, and says so.
    let before = mine.clone();
    let again = mine.merge(&theirs);
    assert_eq!(mine, before);
    assert_eq!((again.updated, again.kept, again.unchanged), (0, 1, 2));
    // A file merged into a copy of itself (one's own export): every item unchanged.
    let mut copy = mine.clone();
    let r = copy.merge(&mine);
    assert_eq!(
        (r.added, r.updated, r.kept, r.unchanged),
        (0, 0, 0, mine.items.len())
    );
}

#[test]
fn orphans_are_ids_the_course_no_longer_has() {
    let mut p = Progress::default();
    p.items.insert(
        "kept".into(),
        record("2025-01-01T00:00:00Z", 3, "2025-01-05T00:00:00Z"),
    );
    p.items.insert(
        "gone".into(),
        record("2025-01-01T00:00:00Z", 3, "2025-01-05T00:00:00Z"),
    );
    assert_eq!(p.orphans(|id| id == "kept"), vec!["gone"]);
}

#[test]
fn import_refuses_a_newer_file_without_moving_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("other.json");
    fs::write(&f, r#"{"schema": 99}"#).expect("write");
    let e = read_file(&f).expect_err("newer").to_string();
    assert!(e.contains("newer"), "{e}");
    assert!(f.exists());
}

#[test]
fn a_card_fsrs_cannot_schedule_is_repaired_and_the_file_stays_readable() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut p = Progress::default();
    let mut r = record("2026-11-01T10:00:00Z", 3, "2026-11-02T10:00:00Z");
    r.card.stability = 0.0; // in review: FSRS would divide by it
    p.items.insert("x".into(), r);
    p.lessons.insert(
        "l".into(),
        LessonProgress {
            read: f64::NAN,
            first_opened: Utc::now(),
            last_opened: Utc::now(),
            sections: vec![f64::INFINITY, 0.5],
            place: None,
        },
    );
    let now: DateTime<Utc> = "2026-11-03T10:00:00Z".parse().expect("time");
    p.record_review(
        "x",
        crate::course::grade::SelfGrade::Good,
        None,
        "drill",
        None,
        now,
    );
    assert!(p.items["x"].card.is_sound(), "{:?}", p.items["x"].card);
    assert_eq!(p.items["x"].reviews.len(), 2, "history kept");
    // A card broken some other way is reset on save, and the file loads again.
    p.items.get_mut("x").expect("x").card.difficulty = f64::INFINITY;
    save(dir.path(), &mut p).expect("save");
    let text = fs::read_to_string(dir.path().join(FILE_NAME)).expect("read");
    for field in ["stability", "difficulty", "read"] {
        assert!(
            !text.contains(&format!("\"{field}\": null")),
            "no non-finite {field} saved as null:\n{text}"
        );
    }
    let (back, notice) = load(dir.path()).expect("load");
    assert!(notice.is_none(), "not quarantined: {notice:?}");
    assert_eq!(back.items["x"].card.phase, CardPhase::New);
    assert_eq!(back.items["x"].reviews.len(), 2);
    assert_eq!(back.lessons["l"].read, 0.0);
    assert_eq!(back.lessons["l"].sections, vec![0.0, 0.5]);
}

/// A file from before reading was earned on screen: `"read": 1.0` and no sections. It loads,
/// the lesson keeps its mark, and new reading only adds to it.
#[test]
fn an_old_read_fraction_loads_and_keeps_its_mark() {
    let dir = tempfile::tempdir().expect("tmp");
    fs::write(
        dir.path().join(FILE_NAME),
        r#"{"schema": 2, "lessons": {
            "ring": {"read": 1.0, "first_opened": "2026-11-01T10:00:00Z", "last_opened": "2026-11-01T10:00:02Z"},
            "tp": {"read": 0.4, "first_opened": "2026-11-01T10:00:00Z", "last_opened": "2026-11-01T10:00:02Z"}
        }}"#,
    )
    .expect("write");
    let (mut p, notice) = load(dir.path()).expect("load");
    assert_eq!(notice, None);
    assert_eq!(p.lesson_state("ring", &[]), LessonMark::Done);
    assert_eq!(p.lesson_state("tp", &[]), LessonMark::Started);
    assert_eq!(p.read_fraction("tp"), Some(0.4));
    // Reading it again on screen, a little: the old mark stays, the sections are added.
    let now: DateTime<Utc> = "2026-12-01T10:00:00Z".parse().expect("time");
    let note = ReadingNote {
        read: 0.1,
        sections: vec![1.0, 0.2],
        place: Some(Place {
            section: 1,
            title: "Ring".into(),
            line: 3,
        }),
    };
    assert!(p.note_lesson("ring", &note, now));
    assert_eq!(p.lessons["ring"].read, 1.0);
    save(dir.path(), &mut p).expect("save");
    let (back, _) = load(dir.path()).expect("load");
    assert_eq!(back, p);
    assert_eq!(back.place("ring").map(|p| p.line), Some(3));
}

#[test]
fn merge_takes_each_sections_furthest_reading_and_the_newer_place() {
    let t0: DateTime<Utc> = "2026-12-01T10:00:00Z".parse().expect("time");
    let t1 = t0 + chrono::Duration::minutes(1);
    let place = |line| Place {
        section: 0,
        title: "A".into(),
        line,
    };
    let note = |sections: Vec<f64>, line| ReadingNote {
        read: 0.2,
        sections,
        place: Some(place(line)),
    };
    let mut a = Progress::default();
    a.note_lesson("l", &note(vec![1.0, 0.1], 5), t0);
    let mut b = Progress::default();
    b.note_lesson("l", &note(vec![0.2, 0.8, 0.3], 9), t1);
    a.merge(&b);
    assert_eq!(a.lessons["l"].sections, vec![1.0, 0.8, 0.3]);
    assert_eq!(a.place("l"), Some(&place(9)));
}

#[test]
fn imports_with_impossible_grades_or_dates_are_refused_naming_the_item() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("in.json");
    let mut p = Progress::default();
    p.items.insert(
        "good-one".into(),
        record("2026-11-01T10:00:00Z", 3, "2026-11-02T10:00:00Z"),
    );
    p.items.insert(
        "grade-255".into(),
        record("2026-11-01T10:00:00Z", 255, "2026-11-02T10:00:00Z"),
    );
    write_file(&file, &p, true).expect("write");
    let e = read_file(&file).expect_err("grade 255").to_string();
    assert!(e.contains("`grade-255`") && e.contains("grade 255"), "{e}");
    let mut p = Progress::default();
    p.items.insert(
        "far".into(),
        record("9999-01-01T00:00:00Z", 3, "9999-01-02T00:00:00Z"),
    );
    write_file(&file, &p, true).expect("write");
    let e = read_file(&file).expect_err("year 9999").to_string();
    assert!(e.contains("`far`") && e.contains("2000..2200"), "{e}");
    // A FIFO is refused, not read forever.
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("c");
    // SAFETY: mkfifo with a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let e = read_file(&fifo).expect_err("fifo").to_string();
    assert!(e.contains("not a regular file"), "{e}");
}

#[test]
fn a_schema_beyond_u32_is_not_read_as_schema_1() {
    let dir = tempfile::tempdir().expect("tmp");
    fs::write(
        dir.path().join(FILE_NAME),
        r#"{"schema": 4294967297, "lessons": {}}"#,
    )
    .expect("write");
    let (p, notice) = load(dir.path()).expect("load");
    assert_eq!(p, Progress::default());
    match notice {
        Some(LoadNotice::Quarantined { reason, .. }) => {
            assert!(reason.contains("4294967297"), "{reason}")
        }
        other => panic!("quarantined expected, got {other:?}"),
    }
}

#[test]
fn stale_temp_files_of_dead_processes_are_removed_at_load() {
    let dir = tempfile::tempdir().expect("tmp");
    // A pid that cannot exist (above the kernel's pid_max limit of 2^22).
    let dead = dir.path().join(format!(".{FILE_NAME}.tmp-{}", 1 << 23));
    let mine = dir
        .path()
        .join(format!(".{FILE_NAME}.tmp-{}", std::process::id()));
    // Today's names add a random part after the PID.
    let dead_new = dir
        .path()
        .join(format!(".{FILE_NAME}.tmp-{}-Ab3xYz9QwErT", 1 << 23));
    fs::write(&dead, "{").expect("write");
    fs::write(&dead_new, "{").expect("write");
    fs::write(&mine, "{").expect("write");
    load(dir.path()).expect("load");
    assert!(!dead.exists(), "a dead writer's temp file is removed");
    assert!(!dead_new.exists(), "with its random part too");
    assert!(mine.exists(), "a live process's is not");
}

#[test]
fn a_symlinked_progress_file_is_written_through() {
    let dir = tempfile::tempdir().expect("tmp");
    let real_dir = dir.path().join("sync");
    fs::create_dir_all(&real_dir).expect("mkdir");
    let home = dir.path().join("home");
    fs::create_dir_all(&home).expect("mkdir");
    std::os::unix::fs::symlink(real_dir.join("progress.json"), home.join(FILE_NAME)).expect("link");
    let mut p = Progress::default();
    p.items.insert(
        "x".into(),
        record("2026-11-01T10:00:00Z", 3, "2026-11-02T10:00:00Z"),
    );
    save(&home, &mut p).expect("save");
    assert!(
        fs::symlink_metadata(home.join(FILE_NAME))
            .expect("meta")
            .file_type()
            .is_symlink(),
        "the link is kept"
    );
    let (back, _) = load(&home).expect("load");
    assert!(back.items.contains_key("x"));
    assert!(real_dir.join("progress.json").exists());
}

#[test]
fn a_save_merges_what_another_process_saved_meanwhile() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut a = Progress::default();
    let mut b = Progress::default();
    a.items.insert(
        "a".into(),
        record("2026-11-01T10:00:00Z", 3, "2026-11-02T10:00:00Z"),
    );
    b.items.insert(
        "b".into(),
        record("2026-11-01T11:00:00Z", 1, "2026-11-01T11:10:00Z"),
    );
    save(dir.path(), &mut a).expect("a");
    save(dir.path(), &mut b).expect("b");
    let (back, _) = load(dir.path()).expect("load");
    assert!(back.items.contains_key("a") && back.items.contains_key("b"));
    assert!(b.items.contains_key("a"), "the saver's copy now has it too");
}

/// An item with `n` reviews, a minute apart.
fn many_reviews(n: usize) -> ItemRecord {
    let mut r = record("2026-11-01T10:00:00Z", 3, "2026-11-02T10:00:00Z");
    let first = r.reviews[0].clone();
    r.reviews = (0..n)
        .map(|i| Review {
            at: first.at + chrono::Duration::minutes(i as i64),
            ..first.clone()
        })
        .collect();
    r
}

#[test]
fn a_byte_order_mark_is_skipped_not_quarantined() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut p = Progress::default();
    p.items.insert(
        "x".into(),
        record("2026-11-01T10:00:00Z", 3, "2026-11-02T10:00:00Z"),
    );
    save(dir.path(), &mut p).expect("save");
    let path = dir.path().join(FILE_NAME);
    let mut bytes = b"\xef\xbb\xbf".to_vec();
    bytes.extend(fs::read(&path).expect("read"));
    fs::write(&path, &bytes).expect("write");
    let (back, notice) = load(dir.path()).expect("load");
    assert_eq!(notice, None, "not quarantined");
    assert_eq!(back, p);
    // An imported file with one too.
    let other = dir.path().join("other.json");
    fs::write(&other, &bytes).expect("write");
    assert_eq!(read_file(&other).expect("imports"), p);
}

#[test]
fn imports_past_the_limits_are_refused_saying_the_limit() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("in.json");
    let refused = |p: &Progress| {
        write_file(&file, p, true).expect("write");
        read_file(&file).expect_err("refused").to_string()
    };
    let mut p = Progress::default();
    p.items
        .insert("busy".into(), many_reviews(MAX_REVIEWS_PER_ITEM + 1));
    let e = refused(&p);
    assert!(
        e.contains("`busy`") && e.contains("10001 reviews") && e.contains("10000"),
        "{e}"
    );
    p.items
        .insert("busy".into(), many_reviews(MAX_REVIEWS_PER_ITEM));
    write_file(&file, &p, true).expect("write");
    read_file(&file).expect("at the limit is fine");

    let mut p = Progress::default();
    let long = "x".repeat(MAX_ID_BYTES + 1);
    p.items.insert(
        long,
        record("2026-11-01T10:00:00Z", 3, "2026-11-02T10:00:00Z"),
    );
    let e = refused(&p);
    assert!(e.contains("257 bytes") && e.contains("256"), "{e}");
    assert!(e.len() < 400, "the id is not repeated whole: {e}");

    let mut p = Progress::default();
    p.items.insert(
        "evil\u{1b}]2;PWNED\u{7}".into(),
        record("2026-11-01T10:00:00Z", 3, "2026-11-02T10:00:00Z"),
    );
    let e = refused(&p);
    assert!(e.contains("control characters"), "{e}");
    assert!(
        e.contains("evil\\x1b]2;PWNED\\x07") && !e.contains('\u{1b}'),
        "{e:?}"
    );

    let mut p = Progress::default();
    let one = record("2026-11-01T10:00:00Z", 3, "2026-11-02T10:00:00Z");
    for i in 0..=MAX_ITEMS {
        p.items.insert(format!("i{i}"), one.clone());
    }
    let e = p.validate().expect_err("too many");
    assert!(e.contains("100001 items") && e.contains("100000"), "{e}");
}

/// Nothing is saved that the next start would set aside: a file that would pass the loader's
/// limit pretty-printed is written compact, and one that would pass it even so is refused,
/// leaving the file there as it was.
#[test]
fn a_save_never_writes_more_than_the_loader_reads() {
    let mut p = Progress::default();
    for i in 0..3 {
        p.items.insert(format!("a{i}"), many_reviews(50));
    }
    let pretty = serde_json::to_vec_pretty(&p).expect("json").len() as u64;
    let compact = serde_json::to_vec(&p).expect("json").len() as u64;
    assert!(
        compact + 1 < pretty,
        "the test's premise: {compact} < {pretty}"
    );
    // Pretty where it fits, compact where only that fits, refused past that.
    assert_eq!(
        encode(&p, pretty + 1).expect("fits").len() as u64,
        pretty + 1
    );
    let small = encode(&p, compact + 1).expect("compact fits");
    assert_eq!(small.len() as u64, compact + 1);
    let back: Progress = serde_json::from_slice(&small).expect("reads back");
    assert_eq!(back, p);
    assert!(matches!(encode(&p, compact), Err(Ok(n)) if n == compact + 1));

    // At the real limit: a save past it is refused and the file there stays as it was.
    let dir = tempfile::tempdir().expect("tmp");
    let mut small = Progress::default();
    small.items.insert(
        "x".into(),
        record("2026-11-01T10:00:00Z", 3, "2026-11-02T10:00:00Z"),
    );
    save(dir.path(), &mut small).expect("save");
    let path = dir.path().join(FILE_NAME);
    let on_disk = fs::read(&path).expect("read");
    let mut big = Progress::default();
    let mut r = record("2026-11-01T10:00:00Z", 3, "2026-11-02T10:00:00Z");
    // Long modes (which an import refuses, but a save does not look at) make it big quickly.
    r.reviews[0].mode = "m".repeat(1 << 20);
    for i in 0..17 {
        big.items.insert(format!("b{i}"), r.clone());
    }
    let e = save(dir.path(), &mut big).expect_err("too big");
    assert!(matches!(e, ProgressError::TooBig { .. }), "{e}");
    let said = e.to_string();
    assert!(
        said.contains("16 MiB") && said.contains("unchanged"),
        "{said}"
    );
    assert_eq!(fs::read(&path).expect("read"), on_disk, "unchanged");
    let left: Vec<_> = fs::read_dir(dir.path())
        .expect("list")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_fifo_at_the_progress_file_is_refused_at_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join(FILE_NAME);
    let c = std::ffi::CString::new(path.to_str().expect("utf-8")).expect("c");
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (tx, rx) = std::sync::mpsc::channel();
    let d = dir.path().to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(load(&d).map(|_| ()).map_err(|e| e.to_string()));
    });
    let e = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("answered at once, not blocked on the FIFO")
        .expect_err("refused");
    assert!(e.contains("not a regular file"), "{e}");
}

/// The disk-full message says the OS error once, also through anyhow's `{:#}` (which prints
/// every error in a chain).
#[test]
fn a_write_error_says_the_os_error_once() {
    let e = ProgressError::Write {
        path: "/full/progress.json".into(),
        error: std::io::Error::from_raw_os_error(libc::ENOSPC),
    };
    let said = format!("{:#}", anyhow::Error::new(e));
    assert_eq!(said.matches("os error 28").count(), 1, "{said}");
    let dir = tempfile::tempdir().expect("tmp");
    let e = write_file(
        &dir.path().join("nowhere/x.json"),
        &Progress::default(),
        true,
    )
    .expect_err("no folder");
    let said = format!("{:#}", anyhow::Error::new(e));
    assert_eq!(said.matches("os error 2").count(), 1, "{said}");
}

/// Export never follows a link at the name, with or without force; ringlab's own progress
/// file in its home may be one (the user's), and is written through, by a private temporary
/// file beside the target.
#[test]
fn export_refuses_a_link_and_replaces_a_file_by_a_new_inode() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().expect("tmp");
    let victim = dir.path().join("victim");
    fs::write(&victim, "the victim's").expect("write");
    let link = dir.path().join("p.json");
    std::os::unix::fs::symlink(&victim, &link).expect("link");
    let p = Progress::default();
    for force in [false, true] {
        let e = write_file(&link, &p, force).expect_err("a link");
        assert!(e.to_string().contains("symbolic link"), "{e}");
    }
    assert_eq!(fs::read_to_string(&victim).expect("read"), "the victim's");
    let plain = dir.path().join("q.json");
    fs::write(&plain, "old").expect("write");
    let ino = fs::metadata(&plain).expect("meta").ino();
    assert!(matches!(
        write_file(&plain, &p, false),
        Err(ProgressError::Name(crate::files::WriteError::Exists(_)))
    ));
    write_file(&plain, &p, true).expect("force");
    assert_ne!(fs::metadata(&plain).expect("meta").ino(), ino);
    assert_eq!(read_file(&plain).expect("reads"), p);
}

/// Where the labs were left travels in the file; a value this build cannot read (a newer
/// build's field, a hand edit) reads as nothing, never as a corrupt file; a merge keeps this
/// side's place and takes the other's where this side has none.
#[test]
fn the_labs_place_round_trips_reads_leniently_and_merges() {
    use crate::collective::{Algorithm, Collective, Dtype};
    let live = LiveFields {
        coll: Collective::AllGather,
        algo: Algorithm::Ring,
        ranks: 4,
        dtype: Dtype::F32,
        minbytes: 1 << 10,
        maxbytes: 1 << 20,
        backend: crate::lab::Backend::Tcp,
        repeat: 3,
    };
    let mut p = Progress::default();
    p.lab_place.hang = Some("silent-drop".into());
    p.lab_place.live = Some(live);
    let text = serde_json::to_string(&p).expect("json");
    let back: Progress = serde_json::from_str(&text).expect("back");
    assert_eq!(back.lab_place, p.lab_place);
    // An empty place is not written at all (older builds read the file as before).
    let plain = serde_json::to_string(&Progress::default()).expect("json");
    assert!(!plain.contains("lab_place"), "{plain}");
    let odd = r#"{"schema":2,"lab_place":{"hang":7,"live":"fast"}}"#;
    let read: Progress = serde_json::from_str(odd).expect("lenient");
    assert!(read.lab_place.is_empty());
    let mut mine = Progress::default();
    mine.lab_place.hang = Some("docker0".into());
    mine.merge(&p);
    assert_eq!(mine.lab_place.hang.as_deref(), Some("docker0"));
    assert_eq!(mine.lab_place.live, Some(live));
}
