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
