//! Every lesson of the shipped course renders cleanly at the widths the reader uses (76 columns
//! at 80x24, 196 at 200x60): no line wider than the screen, no error boxes; and the real app
//! pages through each one to the end at 80x24 and 200x60 without panicking.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ringlab::course::Course;
use ringlab::tui::app::{self, Action, App};
use ringlab::tui::markdown::{RenderOptions, plain_lines, render};
use ringlab::tui::theme::Theme;

#[test]
fn every_lesson_fits_and_has_no_error_boxes() {
    let course = Course::embedded();
    let theme = Theme::color();
    let mut seen = 0;
    let mut quiz_boxes = 0;
    for lesson in course.lessons() {
        seen += 1;
        for width in [76u16, 196] {
            let rendered = render(
                &lesson.body,
                &RenderOptions {
                    width,
                    theme: &theme,
                    raw_tex: false,
                    slides: false,
                },
            );
            assert!(!rendered.lines.is_empty(), "{}: empty", lesson.meta.id);
            let plain = plain_lines(&rendered);
            // Quiz boxes show a sample draw, never a template's `{N}` or `{M:bytes}`, and
            // say what to press rather than an internal id or a command to type.
            let mut in_quiz = false;
            for l in &plain {
                let t = l.trim_start();
                if t.starts_with("┌ quiz ") {
                    in_quiz = true;
                    quiz_boxes += 1;
                } else if t.starts_with('└') {
                    in_quiz = false;
                }
                if in_quiz && let Some(p) = ringlab::course::quiz::placeholders(l).first() {
                    panic!("{}: unfilled {{{}}} in {l:?}", lesson.meta.id, p.name);
                }
                assert!(!l.contains("quiz item `"), "{}: {l:?}", lesson.meta.id);
                assert!(!l.contains("open it with"), "{}: {l:?}", lesson.meta.id);
            }
            for (i, line) in rendered.lines.iter().enumerate() {
                assert!(
                    line.width() <= usize::from(width),
                    "{} at width {width}: line {i} is {} wide: {:?}",
                    lesson.meta.id,
                    line.width(),
                    plain[i]
                );
                assert!(
                    !line.spans.iter().any(|s| s.style == theme.error),
                    "{} at width {width}: error box at line {i}: {:?}",
                    lesson.meta.id,
                    plain[i]
                );
            }
        }
    }
    assert!(seen >= 8, "expected the whole course, saw {seen} lessons");
    assert!(quiz_boxes >= 40, "quiz boxes checked: {quiz_boxes}");
}

#[test]
fn computed_table_renders_in_the_ring_lesson() {
    let course = Course::embedded();
    let lesson = course
        .lessons()
        .find(|l| l.meta.id == "ring-allreduce")
        .expect("ring lesson");
    let theme = Theme::color();
    let rendered = render(
        &lesson.body,
        &RenderOptions {
            width: 76,
            theme: &theme,
            raw_tex: false,
            slides: false,
        },
    );
    let text = plain_lines(&rendered).join("\n");
    // The caption (it may wrap) says what the table shows and where it comes from.
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("computed from the schedule module"), "{text}");
    assert!(
        flat.contains("all-reduce of "),
        "the caption names the collective: {text}"
    );
    assert!(text.contains("1.750"), "{text}");
    assert!(text.contains("1.969"), "{text}");
}

fn frame(app: &mut App, terminal: &mut Terminal<TestBackend>) -> String {
    terminal.draw(|f| app::render(app, f)).expect("draw");
    format!("{}", terminal.backend())
}

#[test]
fn the_app_pages_through_every_lesson_at_80x24_and_200x60() {
    let ids: Vec<String> = Course::embedded()
        .lessons()
        .map(|l| l.meta.id.clone())
        .collect();
    for (w, h) in [(80u16, 24u16), (200, 60)] {
        for id in &ids {
            let mut app = App::new(Course::embedded(), Theme::color());
            app::update(&mut app, Action::Resize(w, h));
            app.open_lesson(id).expect("lesson opens");
            let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("terminal");
            let mut last = frame(&mut app, &mut terminal);
            let mut pages = 0;
            loop {
                app::update(&mut app, Action::Page(1));
                let next = frame(&mut app, &mut terminal);
                if next == last {
                    break;
                }
                last = next;
                pages += 1;
                assert!(
                    pages < 2000,
                    "{id} at {w}x{h}: paging never reaches the end"
                );
            }
        }
    }
}

/// Lesson 1's code fits 80 columns: its comments sit above the lines they explain, so no
/// line of sanity.py wraps with `┆` at 80x24.
#[test]
fn lesson_1s_code_does_not_wrap_at_80_columns() {
    let mut app = ringlab::tui::app::App::new(
        ringlab::course::Course::embedded(),
        ringlab::tui::theme::Theme::color(),
    );
    ringlab::tui::app::update(&mut app, ringlab::tui::app::Action::Resize(80, 24));
    app.open_lesson("collectives").expect("lesson");
    let Some(ringlab::tui::app::Screen::Lesson(l)) = app.stack.last() else {
        panic!("the lesson")
    };
    let wrapped: Vec<&String> = l.plain.iter().filter(|t| t.contains('┆')).collect();
    assert!(wrapped.is_empty(), "wrapped code lines: {wrapped:#?}");
}

/// On a slide a quiz box is worded for a projector: how the presenter asks it, no desk key
/// and no note about draws; at the desk the same box says what to press (L14).
#[test]
fn quiz_boxes_on_slides_are_worded_for_the_class() {
    let course = Course::embedded();
    let theme = Theme::color();
    let body = &course
        .lessons()
        .find(|l| l.body.contains("```quiz") && l.body.contains("{M"))
        .expect("a lesson with a parametric quiz")
        .body;
    let text = |slides: bool| {
        let r = render(
            body,
            &RenderOptions {
                width: 196,
                theme: &theme,
                raw_tex: false,
                slides,
            },
        );
        plain_lines(&r).join("\n")
    };
    let desk = text(false);
    assert!(
        desk.contains("press Q to take this lesson's quiz"),
        "{desk}"
    );
    assert!(desk.contains("each attempt draws anew"), "{desk}");
    let slides = text(true);
    assert!(slides.contains("Enter asks the class"), "{slides}");
    assert!(!slides.contains("press Q"), "{slides}");
    assert!(!slides.contains("draws anew"), "{slides}");
}
