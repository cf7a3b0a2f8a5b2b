//! Presenter mode through ratatui's TestBackend: slides from sections, fitted to the screen,
//! clicker keys, blank screen, narrated ring, class quiz, projector theme, status messages
//! that stay a few seconds.

use std::path::Path;
use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Modifier;
use ringlab::course::Course;
use ringlab::tui::app::{self, Action, App, Screen};
use ringlab::tui::theme::Theme;

fn fixture_app() -> App {
    let course = Course::from_dir(Path::new("tests/fixtures/tui")).expect("fixture course");
    App::new(course, Theme::color())
}

fn text(app: &App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).expect("terminal");
    t.draw(|f| app::render(app, f)).expect("draw");
    format!("{}", t.backend())
}

fn present(app: &mut App, w: u16, h: u16) {
    app::update(app, Action::Resize(w, h));
    app::update(app, ringlab::tui::screens::home::Verb::Present.act());
    assert!(
        matches!(app.stack.last(), Some(Screen::Present(_))),
        "P on the course map presents the selected lesson"
    );
}

fn slide_titles(app: &App) -> Vec<String> {
    match app.stack.last() {
        Some(Screen::Present(p)) => p.slides.iter().map(|s| s.heading()).collect(),
        _ => panic!("not presenting"),
    }
}

#[test]
fn a_lesson_becomes_one_slide_per_section_and_clicker_keys_walk_them() {
    let mut app = fixture_app();
    present(&mut app, 100, 30);
    assert_eq!(
        slide_titles(&app),
        ["A sample lesson", "Numbers", "Code", "Search target"]
    );
    let first = text(&app, 100, 30);
    assert!(first.contains("slide 1/4"), "{first}");
    assert!(first.contains("Ring all-reduce sends"), "{first}");
    // The big title is drawn with block characters, not as plain text.
    assert!(first.contains('█') || first.contains('▀'), "{first}");
    app::update(&mut app, Action::Page(1));
    let second = text(&app, 100, 30);
    assert!(second.contains("slide 2/4"), "{second}");
    assert!(
        second.contains("1.500"),
        "the table is on the slide:\n{second}"
    );
    assert!(!second.contains("Ring all-reduce sends"), "{second}");
    app::update(&mut app, Action::Page(-1));
    assert!(text(&app, 100, 30).contains("slide 1/4"));
    app::update(&mut app, Action::Bottom);
    app::update(&mut app, Action::Page(1));
    let last = text(&app, 100, 30);
    assert!(last.contains("slide 4/4"), "{last}");
    assert!(last.contains("last slide"), "{last}");
}

#[test]
fn every_slide_of_the_shipped_course_fits_the_screen() {
    let mut app = App::new(Course::embedded(), Theme::color());
    for (w, h) in [(80, 24), (120, 40)] {
        for entry in 0..app.course.entries.len() {
            app.stack.truncate(1);
            if let Some(Screen::Home(home)) = app.stack.first_mut() {
                home.selected = entry;
            }
            present(&mut app, w, h);
            let Some(Screen::Present(p)) = app.stack.last() else {
                panic!("presenting")
            };
            assert!(!p.slides.is_empty());
            for s in &p.slides {
                let (_, rows) = ringlab::tui::screens::present::title_layout(&s.heading(), w - 4);
                // Top line, title, a gap, the body, the hint bar.
                assert!(
                    1 + rows as usize + 1 + s.lines.len() < h as usize,
                    "{} at {w}x{h}: {} lines",
                    s.heading(),
                    s.lines.len()
                );
            }
            app::update(&mut app, Action::Back);
        }
    }
}

#[test]
fn b_blanks_the_screen_and_any_key_brings_the_slide_back() {
    let mut app = fixture_app();
    present(&mut app, 100, 30);
    app::update(&mut app, ringlab::tui::screens::present::Verb::Blank.act());
    let blank = text(&app, 100, 30);
    assert!(
        blank.lines().all(|l| l.trim_matches(['"', ' ']).is_empty()),
        "{blank}"
    );
    app::update(&mut app, Action::Page(1));
    let back = text(&app, 100, 30);
    assert!(back.contains("slide 1/4"), "the key only unblanks:\n{back}");
}

#[test]
fn enter_on_a_slide_with_a_ring_block_plays_a_narrated_ring() {
    let mut app = fixture_app();
    present(&mut app, 120, 40);
    app::update(&mut app, Action::Page(1));
    app::update(&mut app, Action::Page(1)); // "Code": has a ring block
    app::update(&mut app, Action::Open);
    let Some(Screen::Ring(r)) = app.stack.last() else {
        panic!("Enter opens the ring")
    };
    assert!(r.playing && r.narrate, "it plays itself, narrated");
    app::update(&mut app, Action::Tick);
    app::update(&mut app, Action::Tick);
    app::update(&mut app, Action::Tick);
    let shown = text(&app, 120, 40);
    assert!(shown.contains("step 3 of 6"), "{shown}");
    assert!(shown.contains("right neighbour"), "{shown}");
    assert!(shown.contains("Σ4"), "{shown}");
    // Step back: the caption follows.
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Step.by(-1));
    let back = text(&app, 120, 40);
    assert!(back.contains("step 2 of 6"), "{back}");
    assert!(back.contains("Σ3"), "{back}");
    app::update(&mut app, Action::Back);
    assert!(matches!(app.stack.last(), Some(Screen::Present(_))));
}

#[test]
fn class_quiz_shows_the_question_a_countdown_then_the_answer_and_records_nothing() {
    let mut app = App::new(Course::embedded(), Theme::color());
    present(&mut app, 120, 40);
    app::update(
        &mut app,
        ringlab::tui::screens::present::Verb::ClassQuiz.act(),
    );
    let Some(Screen::ClassQuiz(q)) = app.stack.last() else {
        panic!("Q opens a class quiz")
    };
    assert!(q.counting());
    let asking = text(&app, 120, 40);
    assert!(asking.contains("question 1 of"), "{asking}");
    assert!(asking.contains("⏱ 0:30"), "{asking}");
    assert!(!asking.contains("Answer:"), "{asking}");
    if let Some(Screen::ClassQuiz(q)) = app.stack.last_mut() {
        q.deadline = Instant::now();
    }
    app::update(&mut app, Action::Tick);
    assert!(text(&app, 120, 40).contains("Time is up"));
    app::update(&mut app, Action::Page(1));
    let revealed = text(&app, 120, 40);
    assert!(revealed.contains("Answer:"), "{revealed}");
    app::update(&mut app, Action::Page(1));
    assert!(text(&app, 120, 40).contains("question 2 of"));
    assert!(app.progress.items.is_empty(), "nothing recorded");
    app::update(&mut app, Action::Back);
    app::update(&mut app, Action::Back);
    assert_eq!(app.theme, Theme::color(), "leaving gives the theme back");
}

#[test]
fn the_projector_theme_is_high_contrast_and_honours_no_color() {
    let mono = Theme::projector(true);
    assert!(mono.mono);
    for s in [mono.title, mono.dim, mono.base, mono.key, mono.warn] {
        assert_eq!(s.fg, None, "no colour under NO_COLOR");
        assert!(!s.add_modifier.contains(Modifier::DIM), "nothing dim");
    }
    let color = Theme::projector(false);
    assert_ne!(color.dim.fg, Some(ratatui::style::Color::DarkGray));
    let mut app = fixture_app();
    app.theme = Theme::mono();
    present(&mut app, 100, 30);
    assert_eq!(
        app.theme, mono,
        "presenting switches to the projector theme"
    );
}

#[test]
fn a_status_message_stays_for_a_few_seconds_or_until_the_next_key() {
    let mut app = fixture_app();
    app::update(&mut app, Action::Resize(100, 30));
    app::update(
        &mut app,
        Action::OpenScreen(ringlab::tui::app::ScreenId::Ring),
    );
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Speed.by(1));
    assert!(app.status.is_some(), "the key's message shows");
    app::update(&mut app, Action::Tick);
    app::update(&mut app, Action::Tick);
    assert!(
        app.status.is_some(),
        "ticks of a playing animation leave it"
    );
    assert!(text(&app, 100, 30).contains("speed:"));
    // Shown for longer than the few seconds: the next tick takes it away.
    app.status_since = Some(Instant::now() - Duration::from_secs(4));
    app::update(&mut app, Action::Tick);
    assert!(app.status.is_none());
    // The next key ends a message at once.
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Speed.by(1));
    assert!(app.status.is_some());
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Step.by(1));
    assert!(app.status.is_none());
}

#[test]
fn a_screen_s_own_keys_are_looked_up_shown_and_listed_in_help() {
    use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
    let mut app = fixture_app();
    present(&mut app, 100, 30);
    let key = |c| Event::Key(KeyEvent::new(c, KeyModifiers::NONE));
    // Presenter keys live in present.rs, not in keys.rs's table.
    assert_eq!(
        ringlab::tui::map_event(&app, &key(KeyCode::PageDown)),
        Some(Action::Page(1))
    );
    assert_eq!(
        ringlab::tui::map_event(&app, &key(KeyCode::Char('b'))),
        Some(ringlab::tui::screens::present::Verb::Blank.act())
    );
    // Global keys still apply.
    assert_eq!(
        ringlab::tui::map_event(&app, &key(KeyCode::Char('q'))),
        Some(Action::Back)
    );
    let bar = text(&app, 100, 30);
    let last = bar.lines().last().unwrap_or_default().to_string();
    assert!(
        last.contains("PgDn next") && last.contains("b blank"),
        "{last}"
    );
    app::update(&mut app, Action::Help);
    let help = text(&app, 100, 30);
    assert!(help.contains("Presenter mode"), "{help}");
    assert!(help.contains("blank the screen"), "{help}");
}

#[test]
fn in_front_of_a_class_the_lab_chart_fills_the_middle_and_the_board_is_set_large() {
    use ringlab::tui::screens::lab::{LabState, RankRow};
    let mut app = fixture_app();
    let mut lab = LabState::new(Default::default());
    lab.phases = ["done", "all-reduce"]
        .iter()
        .map(|p| RankRow {
            phase: p.to_string(),
            since: Instant::now(),
            frozen: Some(Duration::from_millis(1200)),
        })
        .collect();
    // At a desk: the nccl-tests table beside the chart, the board in normal type.
    app.stack.push(Screen::Lab(Box::new(lab)));
    let desk = text(&app, 120, 40);
    assert!(desk.contains("out-of-place | in-place"), "{desk}");
    assert!(desk.contains("rank 1"), "{desk}");
    // Presenting: the same lab opened from a slide.
    let Some(lab) = app.stack.pop() else {
        panic!("the lab screen")
    };
    present(&mut app, 120, 40);
    app.stack.push(lab);
    let class = text(&app, 120, 40);
    assert!(
        !class.contains("out-of-place | in-place"),
        "the table gives way to the chart: {class}"
    );
    assert!(
        !class.contains("rank 1") && !class.contains("R1 all-reduce"),
        "the ranks are set in large type, not letters: {class}"
    );
    let big = class
        .chars()
        .filter(|c| ('\u{2596}'..='\u{259f}').contains(c) || *c == '█' || *c == '▀' || *c == '▄')
        .count();
    assert!(big > 40, "block pixels of large type: {big}\n{class}");
}
