//! The learner's path: reading is earned by time on screen (not by `G` or a search passing
//! through), a lesson reopens where it was left, and the next step is always one key away.

use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ringlab::course::Course;
use ringlab::study::progress::LessonMark;
use ringlab::tui::app::{self, Action, App, Screen};
use ringlab::tui::theme::Theme;

fn course_app() -> App {
    let mut app = App::new(Course::embedded(), Theme::color());
    app::update(&mut app, Action::Resize(80, 24));
    app
}

fn frame(app: &App) -> String {
    let mut t = Terminal::new(TestBackend::new(app.width, app.height)).expect("terminal");
    t.draw(|f| app::render(app, f)).expect("draw");
    format!("{}", t.backend())
}

fn mark(app: &App, id: &str) -> LessonMark {
    app.progress.lesson_state(id, app.quiz_of(id))
}

/// Page through the open lesson, `per_page` on each screen, until its end has been shown.
fn read_to_the_end(app: &mut App, mut t: Instant, per_page: Duration) -> Instant {
    for _ in 0..500 {
        t += per_page;
        app::update_at(app, Action::Page(1), t);
        let Some(Screen::Lesson(l)) = app.stack.last() else {
            panic!("the lesson is on top")
        };
        if l.position(app) >= 1.0 {
            break;
        }
    }
    t += per_page;
    app::update_at(app, Action::Move(0), t);
    t
}

#[test]
fn g_at_the_top_of_a_lesson_does_not_mark_it_read() {
    let mut app = course_app();
    let t = Instant::now();
    app.open_lesson("pipeline-parallelism").expect("lesson");
    app::update_at(&mut app, Action::Bottom, t);
    // A long time on the last screen reads the last screen, not the lesson.
    app::update_at(&mut app, Action::Move(0), t + Duration::from_secs(600));
    app::update_at(&mut app, Action::Back, t + Duration::from_secs(601));
    assert_eq!(mark(&app, "pipeline-parallelism"), LessonMark::Started);
    let f = app
        .progress
        .read_fraction("pipeline-parallelism")
        .expect("opened");
    assert!(f < 0.5, "read {f}");
}

#[test]
fn paging_too_fast_is_not_reading_and_reading_time_is() {
    let mut app = course_app();
    let t = Instant::now();
    app.open_lesson("collectives").expect("lesson");
    app::update_at(&mut app, Action::Move(0), t);
    // A quarter of a second a page: no one reads that fast.
    let t = read_to_the_end(&mut app, t, Duration::from_millis(250));
    app::update_at(&mut app, Action::Back, t);
    assert_eq!(mark(&app, "collectives"), LessonMark::Started);
    // The map shows how much: ◐ with the fraction.
    app::update(&mut app, Action::Top);
    let text = frame(&app);
    assert!(text.contains("◐"), "{text}");
    // A minute a page is reading.
    app.open_lesson("collectives").expect("lesson");
    app::update_at(&mut app, Action::Top, t);
    let t = read_to_the_end(&mut app, t, Duration::from_secs(60));
    app::update_at(&mut app, Action::Back, t);
    assert_eq!(mark(&app, "collectives"), LessonMark::Read);
}

#[test]
fn a_lesson_reopens_where_it_was_left_and_g_goes_to_the_top() {
    let mut app = course_app();
    app.open_lesson("ring-allreduce").expect("lesson");
    for _ in 0..9 {
        app::update(&mut app, Action::Page(1));
    }
    app::update(&mut app, Action::Move(3));
    let (scroll, section) = match app.stack.last() {
        Some(Screen::Lesson(l)) => (l.scroll, l.current_section()),
        _ => panic!("lesson on top"),
    };
    app::update(&mut app, Action::Back);
    app.open_lesson("ring-allreduce").expect("again");
    let Some(Screen::Lesson(l)) = app.stack.last() else {
        panic!("lesson on top")
    };
    assert_eq!((l.scroll, l.current_section()), (scroll, section));
    app::update(&mut app, Action::Top);
    let Some(Screen::Lesson(l)) = app.stack.last() else {
        panic!("lesson on top")
    };
    assert_eq!(l.scroll, 0);
}

/// `ringlab ARGS` in a pty of `cols`x`rows` with its own home, read through a terminal
/// emulator so the assertions see the screen a learner sees.
struct Term {
    session: expectrl::Session,
    vt: vt100::Parser,
}

impl Term {
    fn start(args: &str, home: &std::path::Path, (cols, rows): (u16, u16)) -> Self {
        let bin = env!("CARGO_BIN_EXE_ringlab");
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c")
            .arg(format!(
                "stty rows {rows} cols {cols}; {bin} {args} </dev/tty; echo EXIT=$?"
            ))
            .env("RINGLAB_HOME", home)
            // A fast reader: a screen is read in a few milliseconds (the floor is tested
            // without a terminal, with a clock the test sets).
            .env("RINGLAB_READ_WPM", "1000000")
            .env_remove("NO_COLOR");
        let mut session = expectrl::Session::spawn(cmd).expect("spawn in a pty");
        session
            .get_process_mut()
            .set_window_size(cols, rows)
            .expect("size the pty");
        let n = |x: u16| std::num::NonZeroU16::new(x).expect("size");
        Self {
            session,
            vt: vt100::Parser::new(n(rows), n(cols), 0),
        }
    }

    /// Wait until the screen shows every one of `needles`; the screen's text.
    fn wait(&mut self, needles: &[&str]) -> String {
        let mut screen = String::new();
        let shown = crate::common::wait_until(Duration::from_secs(20), || {
            let mut buf = [0u8; 16 << 10];
            while let Ok(n) = self.session.try_read(&mut buf) {
                if n == 0 {
                    break;
                }
                self.vt.process(&buf[..n]);
            }
            screen = self.vt.screen().contents();
            needles.iter().all(|n| screen.contains(n))
        });
        assert!(
            shown,
            "waiting for {needles:?}; the screen shows:\n{screen}"
        );
        screen
    }

    fn send(&mut self, keys: &str) {
        self.session.send(keys).expect("send");
    }
}

/// From a fresh home: the map names the next step, Enter opens it, the lesson's end names its
/// quiz, the quiz's summary names the next lesson, one key each, through lessons 1 to 3; then
/// the map says every step of the track is done.
#[test]
fn enter_read_quiz_next_runs_through_three_lessons() {
    let home = tempfile::tempdir().expect("home");
    let mut t = Term::start("--lessons tests/fixtures/path", home.path(), (80, 24));
    t.wait(&["Next (n): lesson 1, First steps"]);
    t.send("\r");
    let names = ["First steps", "Second steps", "Third steps"];
    for (i, name) in names.iter().enumerate() {
        let n = i + 1;
        // Read: the header says so once every section has been on screen long enough.
        t.wait(&[name, "● read", "Enter next: quiz on this lesson"]);
        t.send("\r");
        t.wait(&[&format!("What must every rank of lesson {n} do?")]);
        t.send("a");
        t.send("\r");
        t.wait(&["✓ Correct"]);
        t.send("\r");
        match names.get(n) {
            Some(next) => {
                let step = format!("lesson {}, {next}", n + 1);
                t.wait(&["Quiz complete", &format!("n next: {step}")]);
                t.send("n");
            }
            None => {
                t.wait(&["Quiz complete"]);
                t.send("q");
            }
        }
    }
    t.wait(&["every step of your track is done", "3 of 3 lessons done"]);
    t.send("q");
    t.wait(&["EXIT=0"]);
}

#[test]
fn the_interview_track_lists_its_steps_and_minutes() {
    let home = tempfile::tempdir().expect("home");
    let mut t = Term::start("learn --track interview", home.path(), (80, 24));
    let screen = t.wait(&["Interview sprint", "a mock interview"]);
    for step in [
        "lesson 1, The collectives",
        "quiz on lesson 2, Ring all-reduce",
        "hang lab: Pinned to docker0",
    ] {
        assert!(screen.contains(step), "{step}:\n{screen}");
    }
    assert!(screen.contains(" min"), "{screen}");
    assert!(screen.contains("(yours)"), "{screen}");
    // Back on the map, its header follows the track.
    t.send("q");
    t.wait(&["interview sprint 0/11 (T)"]);
    t.send("q");
    t.wait(&["EXIT=0"]);
}

#[test]
fn g_at_the_top_in_a_terminal_does_not_mark_the_lesson_read() {
    let home = tempfile::tempdir().expect("home");
    let mut t = Term::start("learn pipeline-parallelism", home.path(), (80, 24));
    t.wait(&["Pipeline parallelism"]);
    t.send("G");
    t.wait(&["100%"]);
    t.send("q");
    t.wait(&["EXIT=0"]);
    let (p, _) = ringlab::study::progress::load(home.path()).expect("load");
    let quiz = vec!["x".to_string()];
    assert_eq!(
        p.lesson_state("pipeline-parallelism", &quiz),
        LessonMark::Started
    );
}

#[test]
fn a_lesson_reopened_in_a_terminal_comes_back_where_it_was() {
    let home = tempfile::tempdir().expect("home");
    let mut t = Term::start("learn ring-allreduce", home.path(), (80, 24));
    t.wait(&["Ring all-reduce"]);
    for _ in 0..6 {
        t.send("\x1b[6~");
    }
    t.send("jjj");
    // `n` with no search says so: every key before it has landed once that shows.
    t.send("n");
    let before = t.wait(&["no search: press / to search"]);
    let header = |s: &str| s.lines().next().unwrap_or_default().to_string();
    let left = header(&before);
    t.send("q");
    t.wait(&["EXIT=0"]);
    let mut t = Term::start("learn ring-allreduce", home.path(), (80, 24));
    let again = t.wait(&["§"]);
    assert_eq!(header(&again), left, "{again}");
}

/// The tracks screen: each track with its progress, the selected one's steps with minutes.
#[test]
fn tracks_screen_80x24_and_120x40() {
    for (w, h) in [(80, 24), (120, 40)] {
        let mut app = App::new(Course::embedded(), Theme::color());
        app::update(&mut app, Action::Resize(w, h));
        app.progress
            .note_reading("collectives", 1.0, chrono::Utc::now());
        app::update(
            &mut app,
            Action::OpenScreen(ringlab::tui::app::ScreenId::Track),
        );
        app::update(&mut app, Action::Move(1));
        insta::assert_snapshot!(format!("tracks_{w}x{h}"), frame(&app));
        // Enter follows the track: the map's header names its next step.
        app::update(&mut app, Action::Open);
        let text = frame(&app);
        assert!(
            text.contains("Next (n): quiz on lesson 1, The collectives"),
            "{text}"
        );
        assert!(text.contains("interview sprint 1/11 (T)"), "{text}");
    }
}

/// A lesson's quiz summary names the next lesson, one key away; the map's cursor is on it
/// after `q`.
#[test]
fn quiz_summary_names_the_next_lesson_80x24() {
    let mut app = App::new(
        Course::from_dir(std::path::Path::new("tests/fixtures/path")).expect("course"),
        Theme::color(),
    );
    app::update(&mut app, Action::Resize(80, 24));
    app.progress.note_reading("first", 1.0, chrono::Utc::now());
    app::update(&mut app, ringlab::tui::screens::home::Verb::Quiz.act());
    type_text(&mut app, "a");
    app::update(&mut app, Action::InputSubmit);
    app::update(&mut app, Action::Open);
    let next = ringlab::tui::screens::quiz::Verb::Next.act();
    app::update(&mut app, next);
    insta::assert_snapshot!(frame(&app));
    app::update(&mut app, Action::Back);
    let Some(Screen::Home(h)) = app.stack.last() else {
        panic!("the map")
    };
    assert_eq!(h.selected, 1, "the cursor is on lesson 2, the next step");
}

fn type_text(app: &mut App, s: &str) {
    for c in s.chars() {
        app::update(
            app,
            Action::Edit(ringlab::tui::field::InputRequest::InsertChar(c)),
        );
    }
}

/// Search `query` in lesson `id`: the matches here and the count the status gives for the
/// other lessons.
fn search_from(app: &mut App, id: &str, query: &str) -> (usize, usize) {
    use ringlab::tui::screens::lesson::Verb;
    app.stack.truncate(1);
    app.open_lesson(id).expect("lesson");
    app::update(app, Action::Top);
    app::update(app, Verb::Search.act());
    type_text(app, query);
    app::update(app, Action::InputSubmit);
    let status = app.status.clone().unwrap_or_default();
    let num = |after: &str| -> usize {
        status
            .split(after)
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no number after {after:?} in {status:?}"))
    };
    (num(" of "), num("goes on to "))
}

/// The course-wide count is what `n` finds: the same total from any lesson, and stepping with
/// `n` through every lesson visits exactly that many matches.
#[test]
fn search_counts_are_the_matches_n_steps_through() {
    use ringlab::tui::screens::lesson::Verb;
    let mut app = course_app();
    let (here, others) = search_from(&mut app, "ring-allreduce", "busbw");
    let total = here + others;
    let (here6, others6) = search_from(&mut app, "measuring-bandwidth", "busbw");
    assert_eq!(here6 + others6, total, "the same total from lesson 6");
    let (here, _) = search_from(&mut app, "ring-allreduce", "busbw");
    assert!(here > 0);
    let at = |app: &App| match app.stack.last() {
        Some(Screen::Lesson(l)) => (l.entry, l.search.current),
        _ => panic!("a lesson on top"),
    };
    let start = at(&app);
    let mut visited = 1;
    for _ in 0..total + 5 {
        app::update(&mut app, Verb::Match.by(1));
        if at(&app) == start {
            break;
        }
        visited += 1;
    }
    assert_eq!(visited, total, "n visits every counted match once");
    // A search passing through the course reads none of it.
    app::update(&mut app, Action::Back);
    for l in app.course.lessons() {
        let m = mark(&app, &l.meta.id);
        assert!(
            matches!(m, LessonMark::New | LessonMark::Started),
            "{}: {m:?}",
            l.meta.id
        );
    }
}

/// A reading floor that is not a number is refused naming the variable, before any screen.
#[test]
fn a_bad_reading_floor_names_the_variable() {
    let home = tempfile::tempdir().expect("home");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringlab"))
        .env("RINGLAB_HOME", home.path())
        .env("RINGLAB_READ_WPM", "fast")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("RINGLAB_READ_WPM=\"fast\""), "{err}");
    assert!(err.contains("words per minute"), "{err}");
}

/// The course map of a learner part-way: its header names the next step of the track, a
/// part-read lesson shows ◐ with the share read in place of its minutes.
#[test]
fn course_map_part_way_80x24_and_120x40() {
    for (w, h) in [(80, 24), (120, 40)] {
        let mut app = App::new(Course::embedded(), Theme::color());
        let now = chrono::Utc::now();
        app.progress.note_reading("collectives", 1.0, now);
        app.progress.note_reading("ring-allreduce", 0.4, now);
        app.progress.track = Some(ringlab::study::track::TrackId::Interview);
        app::update(&mut app, Action::Resize(w, h));
        let text = frame(&app);
        assert!(text.contains("◐  2. Ring all-reduce"), "{text}");
        assert!(text.contains("40% read"), "{text}");
        insta::assert_snapshot!(format!("course_map_part_way_{w}x{h}"), text);
    }
}

/// The end of a lesson names the next step under its last line and on the hint bar; Enter
/// takes it.
#[test]
fn the_end_of_a_lesson_names_the_next_step_80x24_and_120x40() {
    for (w, h) in [(80, 24), (120, 40)] {
        let mut app = App::new(
            Course::from_dir(std::path::Path::new("tests/fixtures/path")).expect("course"),
            Theme::color(),
        );
        app::update(&mut app, Action::Resize(w, h));
        app.open_lesson("first").expect("lesson");
        app::update(&mut app, Action::Bottom);
        let text = frame(&app);
        assert!(
            text.contains("→ Next (Enter): quiz on this lesson"),
            "{text}"
        );
        insta::assert_snapshot!(format!("lesson_end_{w}x{h}"), text);
        app::update(&mut app, Action::Open);
        assert!(
            matches!(app.stack.last(), Some(Screen::Quiz(_))),
            "Enter opened the quiz"
        );
    }
}
