//! Every screen at 80x24, walked as a learner would: each is opened through the app's own
//! state machine (ratatui's TestBackend draws it), each pane is paged to its end, and every
//! text is reached. A pane cut with no way to scroll ("… N more lines on a taller terminal")
//! fails the walk, as does a position row ("lines a–b of n") whose last page stops short of n.

use std::path::Path;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ringlab::course::Course;
use ringlab::lab::hang::scenario::{self, Fixed, LabReport};
use ringlab::tui::app::{self, Action, App, Screen, ScreenId};
use ringlab::tui::screens::hang::{HangState, Stage};
use ringlab::tui::theme::Theme;

const W: u16 = 80;
const H: u16 = 24;

fn app() -> App {
    let mut app = App::new(Course::embedded(), Theme::mono());
    app::update(&mut app, Action::Resize(W, H));
    app
}

fn frame(app: &App) -> String {
    let mut t = Terminal::new(TestBackend::new(W, H)).expect("terminal");
    t.draw(|f| app::render(app, f)).expect("draw");
    // The rows as text, without the debug quotes TestBackend's Display puts round them.
    format!("{}", t.backend())
        .lines()
        .map(|l| l.trim_matches('"').trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// "lines 4–7 of 12" (or "4–7 of 12") in `text`: the rows in view and the total.
fn position(text: &str) -> Option<(usize, usize, usize)> {
    let (head, tail) = text.split_once('–')?;
    let a: usize = head
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    let mut words = tail.split_whitespace();
    let b = words.next()?.parse().ok()?;
    (words.next()? == "of").then_some(())?;
    let n = words
        .next()?
        .trim_end_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .ok()?;
    Some((a, b, n))
}

/// Every frame from the top of the screen on top to the end of its pane, moving by `step`
/// (PgDn, or j where a screen scrolls by lines) until the frame stops changing.
fn walk(app: &mut App, what: &str, step: Action) -> Vec<String> {
    let mut frames = vec![frame(app)];
    for _ in 0..2000 {
        app::update(app, step);
        let f = frame(app);
        if frames.last() == Some(&f) {
            break;
        }
        frames.push(f);
    }
    for f in &frames {
        assert!(
            !f.contains("on a taller terminal"),
            "{what}: a pane is cut with no way to scroll it:\n{f}"
        );
        assert!(!f.contains("terminal too small"), "{what}:\n{f}");
    }
    let last = frames.last().cloned().unwrap_or_default();
    for row in last.lines() {
        if let Some((a, b, n)) = position(row)
            && row.contains("PgDn")
        {
            assert!(a <= b, "{what}: {row}");
            assert_eq!(
                b, n,
                "{what}: the last page stops short of the end:\n{last}"
            );
        }
    }
    frames
}

/// The frames' text, every row, for "was this ever on screen" checks.
fn seen(frames: &[String]) -> String {
    frames.join("\n")
}

/// Words of `text` in order, as the screen wraps them: each word must be on screen.
fn every_word_reached(frames: &[String], text: &str, what: &str) {
    let all = seen(frames);
    for w in text.split_whitespace().map(|w| w.replace('`', "")) {
        assert!(all.contains(&w), "{what}: “{w}” never shown:\n{all}");
    }
}

fn open(app: &mut App, id: ScreenId) {
    app::update(app, Action::OpenScreen(id));
    assert_eq!(app.stack.last().map(Screen::id), Some(id), "{id:?} opened");
}

fn back_to_map(app: &mut App) {
    while app.stack.len() > 1 {
        app::update(app, Action::Back);
    }
}

#[test]
fn course_map_and_every_lesson_read_to_the_end_at_80x24() {
    let mut app = app();
    walk(&mut app, "course map", Action::Move(1));
    let ids: Vec<String> = app.course.ids().iter().map(|s| s.to_string()).collect();
    assert!(ids.len() >= 10, "{ids:?}");
    for id in &ids {
        back_to_map(&mut app);
        app.open_lesson(id).expect("lesson");
        let frames = walk(&mut app, id, Action::Page(1));
        let last = frames.last().cloned().unwrap_or_default();
        assert!(
            last.lines().next().is_some_and(|l| l.ends_with("100%")),
            "{id}: PgDn reaches the end:\n{last}"
        );
    }
}

#[test]
fn tools_scroll_to_their_end_at_80x24() {
    let mut app = app();
    // The TP calculator at TP 64 (its longest results): the link table and note come into view.
    open(&mut app, ScreenId::TpCalc);
    app::update(&mut app, Action::Move(1));
    for _ in 0..20 {
        app::update(&mut app, Action::Adjust(1));
    }
    let frames = walk(&mut app, "TP calculator at TP 64", Action::Page(1));
    let all = seen(&frames);
    assert!(all.contains("TP 64") || all.contains("◀ 64 ▶"), "{all}");
    for tail in [
        "400G InfiniBand",
        "100G Ethernet",
        "estimates: ring alpha-beta",
    ] {
        assert!(
            all.contains(tail),
            "TP calculator: {tail} never shown:\n{all}"
        );
    }
    // And back up: PgUp returns to the first row.
    for _ in 0..frames.len() {
        app::update(&mut app, Action::Page(-1));
    }
    assert_eq!(frame(&app), frames[0], "PgUp comes back to the top");
    back_to_map(&mut app);
    for (id, step) in [
        (ScreenId::Planner, Action::Page(1)),
        (ScreenId::Ring, Action::Page(1)),
        (ScreenId::Lab, Action::Page(1)),
        (ScreenId::Stats, Action::Move(1)),
    ] {
        open(&mut app, id);
        walk(&mut app, &format!("{id:?}"), step);
        back_to_map(&mut app);
    }
}

#[test]
fn every_hang_scenario_story_is_read_whole_at_80x24() {
    let mut app = app();
    open(&mut app, ScreenId::Hang);
    let (all, _) = scenario::all();
    for (i, sc) in all.iter().enumerate() {
        let Some(Screen::Hang(h)) = app.stack.last_mut() else {
            unreachable!()
        };
        h.selected = i;
        h.scroll = 0;
        let frames = walk(&mut app, &sc.name, Action::Page(1));
        every_word_reached(&frames, &sc.story, &sc.name);
        let all = seen(&frames);
        assert!(
            all.contains("network namespaces") || all.contains("EMULATED"),
            "{}: the last line is reached:\n{all}",
            sc.name
        );
    }
}

fn fixture(name: &str) -> LabReport {
    let path = Path::new("tests/fixtures/hang").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).expect("fixture");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The hang lab after a staged run (a real report, kept as a fixture) and after a re-run that
/// still fails with a long error: the evidence pages to its end, the re-run's ✗ line naming
/// the fix and the fix list stay in view, and the whole error is in the evidence.
#[test]
fn hang_lab_evidence_is_read_whole_after_a_rerun_at_80x24() {
    for name in ["docker0", "skipped-collective"] {
        let mut app = app();
        open(&mut app, ScreenId::Hang);
        let report = fixture(name);
        let (all, _) = scenario::all();
        let at = all.iter().position(|s| s.name == name).expect("scenario");
        let error = "rank 3 failed during step 57/200: collective mismatch: rank 2 is at \
                     collective #170 all-reduce 16384 × f32 sum (step 57 dp gradients), rank 1 \
                     at #170 all-reduce 4096 × f32 sum (step 57 tp mlp); the end of the error";
        let fixed: Fixed = serde_json::from_value(serde_json::json!({
            "outcome": "error",
            "allreduce_correct": false,
            "reason": error,
            "run_s": 0.2,
        }))
        .expect("a fixed report");
        let fix = "Give the job more time: init_process_group(timeout=timedelta(minutes=30))";
        let Some(Screen::Hang(h)) = app.stack.last_mut() else {
            unreachable!()
        };
        let h: &mut HangState = h;
        h.selected = at;
        h.stage = Stage::Diagnosed;
        h.choices = scenario::fix_choices(&all[at]);
        h.report = Some(report.clone());
        let frames = walk(&mut app, name, Action::Page(1));
        // Every evidence row fits one line: none starts a row mid-word at column 0.
        for f in &frames {
            let wrapped = f.lines().find(|r| r.starts_with("KiB"));
            assert!(
                wrapped.is_none(),
                "{name}: a table row wrapped: {wrapped:?}\n{f}"
            );
        }
        // After a re-run that fails with a long error.
        let Some(Screen::Hang(h)) = app.stack.last_mut() else {
            unreachable!()
        };
        h.last_fix = Some((fix.into(), fixed.clone()));
        h.scroll = 0;
        let frames = walk(&mut app, name, Action::Page(1));
        for f in &frames {
            assert!(
                f.contains("✗ the re-run with Give the job more time"),
                "{name}: the verdict names the fix:\n{f}"
            );
            assert!(f.contains("or e to type one"), "{name}: the fix list:\n{f}");
        }
        every_word_reached(&frames, error, name);
        // Every hint out, and the diagnosis: they go where they can be read.
        let Some(Screen::Hang(h)) = app.stack.last_mut() else {
            unreachable!()
        };
        h.hints = all[at].hints.len();
        h.scroll = 0;
        let frames = walk(&mut app, name, Action::Page(1));
        for hint in &all[at].hints {
            every_word_reached(&frames, hint, name);
        }
        every_word_reached(&frames, &report.diagnosis.explanation, name);
    }
}

/// The overlays read whole: `?` and `m` scroll with j to their last row.
#[test]
fn help_and_messages_read_whole_at_80x24() {
    let mut app = app();
    let long = "progress file is corrupt (EOF while parsing an object at line 2 column 0); \
                kept it as ~/.local/share/ringlab/progress.json.quarantined-20261207 \
                and started fresh";
    app.set_notice(long.into());
    let f = frame(&app);
    every_word_reached(&[f], long, "the notice");
    // A resize keeps it; a key dismisses it (and does nothing else).
    app::update(&mut app, Action::Resize(W, H));
    assert!(frame(&app).contains("started fresh"));
    app::update(&mut app, Action::Move(1));
    assert!(!frame(&app).contains("started fresh"));
    app::update(&mut app, Action::Messages);
    let frames = walk(&mut app, "messages", Action::Move(1));
    every_word_reached(&frames, long, "messages");
    app::update(&mut app, Action::Back);
    app::update(&mut app, Action::Help);
    let frames = walk(&mut app, "help", Action::Move(1));
    assert!(seen(&frames).contains("last messages, whole"));
}

fn frame_at(app: &mut App, w: u16, h: u16) -> String {
    app::update(app, Action::Resize(w, h));
    let mut t = Terminal::new(TestBackend::new(w, h)).expect("terminal");
    t.draw(|f| app::render(app, f)).expect("draw");
    format!("{}", t.backend())
}

/// The hang lab's layouts: the list with a story that scrolls (80x24; below the fold it says
/// where the nodes run, which depends on root), and the evidence of a real staged run with a
/// failed re-run, at 80x24 and 120x40.
#[test]
fn hang_lab_layouts_80x24_and_120x40() {
    let mut app = app();
    open(&mut app, ScreenId::Hang);
    let (all, _) = scenario::all();
    let at = all
        .iter()
        .position(|s| s.name == "skipped-collective")
        .expect("scenario");
    let Some(Screen::Hang(h)) = app.stack.last_mut() else {
        unreachable!()
    };
    h.selected = at;
    insta::assert_snapshot!("hang_pick_80x24", frame_at(&mut app, 80, 24));
    let Some(Screen::Hang(h)) = app.stack.last_mut() else {
        unreachable!()
    };
    h.stage = Stage::Diagnosed;
    h.choices = scenario::fix_choices(&all[at]);
    h.report = Some(fixture("skipped-collective"));
    h.hints = 1;
    h.last_fix = Some((
        h.choices[0].text.clone(),
        serde_json::from_value(serde_json::json!({
            "outcome": "hang",
            "allreduce_correct": false,
            "reason": "HANG: rank 0 made no progress for 12 s (stuck in step 57/200); killed the job",
            "detected_after_s": 12.0,
            "run_s": 13.0,
        }))
        .expect("fixed"),
    ));
    insta::assert_snapshot!("hang_evidence_80x24", frame_at(&mut app, 80, 24));
    insta::assert_snapshot!("hang_evidence_120x40", frame_at(&mut app, 120, 40));
}

/// The notice of a progress file set aside (until a key), and `m`: the last messages, newest
/// first, each whole.
#[test]
fn notice_and_messages_80x24_and_120x40() {
    let mut app = app();
    app.set_notice(
        "progress file is corrupt (EOF while parsing an object at line 2 column 0); kept it \
         as ~/.local/share/ringlab/progress.json.quarantined-20261207 and started fresh"
            .into(),
    );
    insta::assert_snapshot!("notice_80x24", frame_at(&mut app, 80, 24));
    insta::assert_snapshot!("notice_120x40", frame_at(&mut app, 120, 40));
    app::update(&mut app, Action::Move(1));
    app.status = Some(
        "lab: the nccl backend needs a GPU: no NVIDIA driver here: libcuda.so.1 cannot be \
         loaded (ringlab doctor says what it found)"
            .into(),
    );
    // As the event loop sees it: a status shown is kept with the messages.
    let _ = app::status_deadline(&mut app);
    app::update(&mut app, Action::Messages);
    insta::assert_snapshot!("messages_80x24", frame_at(&mut app, 80, 24));
    insta::assert_snapshot!("messages_120x40", frame_at(&mut app, 120, 40));
}

/// The study screens (a quiz, the drill, a mock interview) and the presenter at 80x24: each
/// opens, scrolls to its end and cuts nothing without a way to read it (their answer panes
/// are the other part of issue 45; this walk only checks that none is cut for good).
#[test]
fn study_screens_and_the_presenter_walk_at_80x24() {
    use ringlab::tui::screens::home::Verb;
    for (verb, step) in [
        (Verb::Quiz, Action::Move(1)),
        (Verb::Drill, Action::Move(1)),
        (Verb::Mock, Action::Move(1)),
        (Verb::Present, Action::Page(1)),
    ] {
        let mut app = app();
        app::update(&mut app, verb.act());
        assert!(app.stack.len() > 1, "{verb:?} opened a screen");
        walk(&mut app, &format!("{verb:?}"), step);
    }
}

/// The running board at 80x24 with eight ranks and a flood of long log lines: every rank's
/// row shows, the newest log line shows (cut with "…" rather than wrapped away), and nothing
/// says "on a taller terminal".
#[test]
fn the_running_board_fits_80x24() {
    use ringlab::lab::Event;
    use ringlab::lab::job::launch::Msg;
    use ringlab::tui::screens::hang::HangUpdate;
    let mut app = app();
    open(&mut app, ScreenId::Hang);
    let Some(Screen::Hang(h)) = app.stack.last_mut() else {
        unreachable!()
    };
    h.stage = Stage::Staging;
    for rank in 0..8 {
        h.receive(
            HangUpdate::Msg(
                0,
                Msg::Event(Event::Step {
                    rank,
                    step: 80,
                    steps: 200,
                }),
            ),
            &mut App::new(Course::embedded(), Theme::mono()),
        );
    }
    for i in 0..40 {
        let line = format!(
            "n1:4242:4242 [0] NCCL INFO line {i}: socketPollConnect: connect to 172.17.0.1<4000> returned Connection refused, retrying (9/34) after sleep for 900 msec"
        );
        h.receive(
            HangUpdate::Msg(0, Msg::Log { rank: 3, line }),
            &mut App::new(Course::embedded(), Theme::mono()),
        );
    }
    // Nothing scrolls while the job runs: one frame says it all.
    let f = frame(&app);
    assert!(!f.contains("on a taller terminal"), "{f}");
    for rank in 0..8 {
        assert!(
            f.lines().any(|l| l.starts_with(&format!(" {rank:<5} "))),
            "rank {rank}:\n{f}"
        );
    }
    assert!(f.contains("line 39:"), "the newest log line:\n{f}");
    assert!(f.contains('…'), "{f}");
}
