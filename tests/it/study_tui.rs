//! The quiz, drill and stats screens: snapshots at 80x24 through ratatui's TestBackend, jumping
//! from an item to its lesson section, and every graded answer saved at once.

use ringlab::tui::field::InputRequest;
use std::path::Path;

use chrono::{DateTime, Duration, FixedOffset, Utc};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ringlab::course::Course;
use ringlab::course::grade::SelfGrade;
use ringlab::study::progress;
use ringlab::tui::app::{self, Action, App, Screen};
use ringlab::tui::screens::drill::{self, DrillOptions};
use ringlab::tui::screens::quiz::{self, QuizState};
use ringlab::tui::screens::stats::StatsState;
use ringlab::tui::theme::Theme;

fn t0() -> DateTime<Utc> {
    "2025-03-03T10:00:00Z".parse().expect("time")
}

fn app() -> App {
    let course = Course::from_dir(Path::new("tests/fixtures/quiz")).expect("fixture course");
    let mut app = App::new(course, Theme::color());
    app::update(&mut app, Action::Resize(80, 24));
    app
}

fn frame(app: &App) -> String {
    let mut t = Terminal::new(TestBackend::new(app.width, app.height)).expect("terminal");
    t.draw(|f| app::render(app, f)).expect("draw");
    format!("{}", t.backend())
}

fn push_quiz(app: &mut App, q: QuizState) {
    app.stack.push(Screen::Quiz(Box::new(q)));
}

fn quiz_state(app: &App) -> &QuizState {
    match app.stack.last() {
        Some(Screen::Quiz(q)) => q,
        _ => panic!("quiz not on top"),
    }
}

fn type_text(app: &mut App, s: &str) {
    for c in s.chars() {
        app::update(app, Action::Edit(InputRequest::InsertChar(c)));
    }
}

#[test]
fn quiz_asking_80x24() {
    let mut app = app();
    let q = quiz::open_at(&app, Some("basics"), t0(), 1).expect("quiz");
    push_quiz(&mut app, q);
    assert!(app.prompt_open(), "typing goes to the answer line");
    type_text(&mut app, "b");
    insta::assert_snapshot!(frame(&app));
}

#[test]
fn quiz_feedback_after_a_wrong_answer_80x24() {
    let mut app = app();
    let q = quiz::open_at(&app, Some("basics"), t0(), 1).expect("quiz");
    push_quiz(&mut app, q);
    type_text(&mut app, "c");
    app::update(&mut app, Action::InputSubmit);
    assert!(!app.prompt_open());
    let text = frame(&app);
    assert!(text.contains("Not quite"), "{text}");
    assert!(text.contains("Patarasuk"), "the source is shown:\n{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn quiz_parametric_item_and_units_80x24() {
    let mut app = app();
    let q = quiz::open_at(&app, Some("basics"), t0(), 1).expect("quiz");
    push_quiz(&mut app, q);
    type_text(&mut app, "b");
    app::update(&mut app, Action::InputSubmit);
    app::update(&mut app, ringlab::tui::screens::quiz::Verb::Next.act());
    // 2 x 7/8 x 1 MiB = 1835008 B = 1.75 MiB; a time unit is refused, not marked wrong.
    type_text(&mut app, "3 ms");
    app::update(&mut app, Action::InputSubmit);
    assert!(app.prompt_open(), "a wrong unit is not an answer");
    assert!(frame(&app).contains("this answer is a size in bytes"));
    for _ in 0.."3 ms".len() {
        app::update(&mut app, Action::Edit(InputRequest::DeletePrevChar));
    }
    type_text(&mut app, "1.75 MiB");
    app::update(&mut app, Action::InputSubmit);
    let text = frame(&app);
    assert!(text.contains("✓ Correct"), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn quiz_summary_lists_missed_items_80x24() {
    let mut app = app();
    let q = quiz::open_at(&app, Some("basics"), t0(), 1).expect("quiz");
    push_quiz(&mut app, q);
    for answer in ["a", "1835008", "b a"] {
        type_text(&mut app, answer);
        app::update(&mut app, Action::InputSubmit);
        app::update(&mut app, ringlab::tui::screens::quiz::Verb::Next.act());
    }
    // The missed first item comes back (after the others, as the queue is short).
    assert_eq!(
        quiz_state(&app)
            .session
            .current
            .as_ref()
            .map(|c| (c.entry, c.attempt)),
        Some((0, 2))
    );
    type_text(&mut app, "2");
    app::update(&mut app, Action::InputSubmit);
    app::update(&mut app, ringlab::tui::screens::quiz::Verb::Next.act());
    assert!(quiz_state(&app).session.finished);
    insta::assert_snapshot!(frame(&app));
}

#[test]
fn o_opens_the_lesson_at_the_items_section() {
    let mut app = app();
    let q = quiz::open_at(&app, Some("basics"), t0(), 1).expect("quiz");
    push_quiz(&mut app, q);
    type_text(&mut app, "b");
    app::update(&mut app, Action::InputSubmit);
    app::update(&mut app, ringlab::tui::screens::quiz::Verb::Next.act());
    type_text(&mut app, "1835008");
    app::update(&mut app, Action::InputSubmit);
    app::update(
        &mut app,
        ringlab::tui::screens::quiz::Verb::GotoSource.act(),
    );
    let Some(Screen::Lesson(l)) = app.stack.last() else {
        panic!("lesson not opened")
    };
    let top = l
        .current_section()
        .map(|i| l.rendered.headings[i].title.clone());
    assert_eq!(top.as_deref(), Some("Bytes"));
    assert!(frame(&app).contains("§ Bytes"));
    // Back returns to the quiz, where it was.
    app::update(&mut app, Action::Back);
    assert!(matches!(app.stack.last(), Some(Screen::Quiz(_))));
}

#[test]
fn every_graded_answer_is_saved_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut app = app();
    app.progress_dir = Some(dir.path().to_path_buf());
    let q = quiz::open_at(&app, Some("basics"), t0(), 1).expect("quiz");
    push_quiz(&mut app, q);
    type_text(&mut app, "b");
    app::update(&mut app, Action::InputSubmit);
    // No quit, no save on exit: the answer is on disk already.
    let (p, notice) = progress::load(dir.path()).expect("load");
    assert_eq!(notice, None);
    let rec = &p.items["basics-steps"];
    assert_eq!(rec.reviews.len(), 1);
    assert_eq!(rec.reviews[0].correct, Some(true));
    assert_eq!(rec.reviews[0].mode, "quiz");
}

#[test]
fn drill_recall_revealed_80x24() {
    let mut app = app();
    let opts = DrillOptions {
        mock: false,
        minutes: None,
        timer: Some(60),
    };
    let d = drill::open_at(&app, &opts, t0(), 1);
    push_quiz(&mut app, d);
    let before = frame(&app);
    assert!(before.contains("60 s left"), "{before}");
    // Three items: the lesson's, then the drill file's (new items in course order).
    while quiz_state(&app)
        .session
        .current
        .as_ref()
        .is_some_and(|c| c.entry < 3)
    {
        // An empty Enter asks for an answer; a second one gives up.
        app::update(&mut app, Action::InputSubmit);
        app::update(&mut app, Action::InputSubmit);
        app::update(&mut app, ringlab::tui::screens::quiz::Verb::Next.act());
    }
    app::update(&mut app, Action::InputSubmit);
    assert_eq!(app.contexts(), vec![ringlab::tui::screens::quiz::RATE]);
    insta::assert_snapshot!(frame(&app));
}

#[test]
fn mock_interview_chains_the_follow_up() {
    let mut app = app();
    let opts = DrillOptions {
        mock: true,
        minutes: Some(15),
        timer: None,
    };
    // The session clock is real here (updates read it), so start it now.
    let d = drill::open_at(&app, &opts, Utc::now(), 1);
    push_quiz(&mut app, d);
    let q = quiz_state(&app);
    let first = q.session.current.as_ref().map(|c| c.entry);
    assert_eq!(first, q.bank.index_of("practice-why-ring"));
    app::update(&mut app, Action::InputSubmit);
    app::update(&mut app, ringlab::tui::screens::quiz::Verb::Rate.by(3));
    app::update(&mut app, ringlab::tui::screens::quiz::Verb::Next.act());
    let q = quiz_state(&app);
    assert_eq!(
        q.session.current.as_ref().map(|c| c.entry),
        q.bank.index_of("practice-what-grows")
    );
    assert!(frame(&app).contains("follow-up"));
}

#[test]
fn stats_80x24() {
    let mut app = app();
    let tz = FixedOffset::east_opt(0).expect("tz");
    let now = t0();
    // Three days of study; one item learned, one missed today, one orphan from an old lesson.
    for d in [2, 1] {
        let at = now - Duration::days(d);
        app.progress.record_review(
            "basics-steps",
            SelfGrade::Good,
            Some(true),
            "quiz",
            None,
            at,
        );
    }
    app.progress.record_review(
        "basics-bytes",
        SelfGrade::Again,
        Some(false),
        "quiz",
        None,
        now - Duration::hours(1),
    );
    app.progress.record_review(
        "practice-why-ring",
        SelfGrade::Easy,
        None,
        "drill",
        None,
        now - Duration::hours(2),
    );
    app.progress.record_review(
        "removed-item",
        SelfGrade::Good,
        None,
        "drill",
        None,
        now - Duration::days(3),
    );
    let s = StatsState::at(&app, now, tz);
    assert_eq!(s.stats.streak_days, 4);
    assert_eq!(s.stats.orphans, vec!["removed-item".to_string()]);
    app.stack.push(Screen::Stats(Box::new(s)));
    insta::assert_snapshot!(frame(&app));
}

/// Ctrl-U, Ctrl-W, Ctrl-A and Ctrl-E in the answer line edit it as in a shell instead of typing
/// letters (the keys go through the app's own event mapping, as in the terminal).
#[test]
fn readline_keys_edit_the_answer_line() {
    use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
    let mut app = app();
    let q = quiz::open_at(&app, Some("basics"), t0(), 1).expect("quiz");
    push_quiz(&mut app, q);
    let press = |app: &mut App, code: KeyCode, m: KeyModifiers| {
        let ev = Event::Key(KeyEvent::new(code, m));
        if let Some(a) = ringlab::tui::map_event(app, &ev) {
            app::update(app, a);
        }
    };
    let answer = |app: &App| {
        quiz_state(app)
            .session
            .current
            .as_ref()
            .map(|c| c.input.clone())
            .unwrap_or_default()
    };
    for c in "a c d".chars() {
        press(&mut app, KeyCode::Char(c), KeyModifiers::NONE);
    }
    press(&mut app, KeyCode::Char('w'), KeyModifiers::CONTROL);
    assert_eq!(answer(&app), "a c ");
    press(&mut app, KeyCode::Char('a'), KeyModifiers::CONTROL);
    press(&mut app, KeyCode::Char('b'), KeyModifiers::NONE);
    assert_eq!(answer(&app), "ba c ");
    press(&mut app, KeyCode::Char('e'), KeyModifiers::CONTROL);
    press(&mut app, KeyCode::Char('d'), KeyModifiers::NONE);
    assert_eq!(answer(&app), "ba c d", "Ctrl-E goes to the end");
    press(&mut app, KeyCode::Char('u'), KeyModifiers::CONTROL);
    assert_eq!(answer(&app), "", "Ctrl-U clears the line");
    assert!(app.prompt_open(), "still answering");
}

/// The shipped course's stats do not fit 80x24: the last row says how much is below, j
/// scrolls to the end and no further, and then the row says k goes back.
#[test]
fn stats_say_what_is_below_and_stop_at_the_end() {
    let mut app = App::new(Course::embedded(), Theme::color());
    app::update(&mut app, Action::Resize(80, 24));
    let tz = FixedOffset::east_opt(0).expect("tz");
    app.stack
        .push(Screen::Stats(Box::new(StatsState::at(&app, t0(), tz))));
    let f = frame(&app);
    let below: usize = f
        .split("↓ ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("a ↓ N more lines row");
    assert!(f.contains("more lines: j"), "{f}");
    for _ in 0..below + 10 {
        app::update(&mut app, Action::Move(1));
    }
    let end = frame(&app);
    assert!(end.contains("↑ k scrolls back"), "{end}");
    let last = ringlab::course::bank::Bank::from_course(&app.course)
        .decks
        .last()
        .map(|d| d.title.chars().take(12).collect::<String>())
        .expect("decks");
    assert!(end.contains(&last), "the last deck ({last}) shows: {end}");
    app::update(&mut app, Action::Move(-1));
    assert!(
        frame(&app).contains("↓ 1 more line: j"),
        "one back: {}",
        frame(&app)
    );
}

/// The "↓ more: j" marker has a row of its own: it never covers the answer's last words
/// (the mock interview's long model answers at 80x24 were cut under it).
#[test]
fn the_more_marker_never_covers_text_80x24() {
    let mut app = App::new(Course::embedded(), ringlab::tui::theme::Theme::color());
    app::update(&mut app, Action::Resize(80, 24));
    let opts = DrillOptions {
        mock: true,
        minutes: None,
        timer: None,
    };
    let d = drill::open_at(&app, &opts, t0(), 1);
    push_quiz(&mut app, d);
    let mut marked = 0;
    for _ in 0..12 {
        if quiz_state(&app).session.finished {
            break;
        }
        app::update(&mut app, Action::InputSubmit);
        // Scroll through the revealed answer: on every screen with the marker, its row holds
        // the marker alone.
        for _ in 0..20 {
            let text = frame(&app);
            let Some(row) = text.lines().find(|l| l.contains("↓ more: j")) else {
                break;
            };
            marked += 1;
            let rest = row.replace("↓ more: j", "");
            assert!(
                rest.trim_matches(|c: char| c == '"' || c == ' ').is_empty(),
                "the marker shares its row with text: {row}\n{text}"
            );
            app::update(&mut app, Action::Move(1));
        }
        app::update(&mut app, ringlab::tui::screens::quiz::Verb::Rate.by(3));
        app::update(&mut app, ringlab::tui::screens::quiz::Verb::Next.act());
    }
    assert!(marked > 0, "no answer was long enough to need the marker");
}

/// On a graded item, Space and letters do nothing: an answer typed on after Enter (`b d`)
/// does not skip to the next item and land there.
#[test]
fn space_on_a_graded_item_does_not_go_on() {
    use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
    let mut app = app();
    let q = quiz::open_at(&app, Some("basics"), t0(), 1).expect("quiz");
    push_quiz(&mut app, q);
    type_text(&mut app, "b");
    app::update(&mut app, Action::InputSubmit);
    assert!(!app.prompt_open(), "graded");
    let entry = |app: &App| quiz_state(app).session.current.as_ref().map(|c| c.entry);
    let before = entry(&app);
    for c in [' ', 'l', 'd'] {
        let key = Event::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
        if let Some(a) = ringlab::tui::map_event(&app, &key) {
            app::update(&mut app, a);
        }
    }
    assert_eq!(entry(&app), before, "still on the graded item");
    let enter = Event::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    let a = ringlab::tui::map_event(&app, &enter).expect("Enter is bound");
    app::update(&mut app, a);
    assert_ne!(entry(&app), before, "Enter goes on");
}
