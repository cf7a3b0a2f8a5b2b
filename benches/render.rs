//! Rendering cost. Targets (issue: foundation): the lesson screen at 120x40 under 1 ms per
//! frame; the first frame (load the built-in course, lay out a lesson, draw) under 100 ms.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ringlab::course::Course;
use ringlab::tui::app::{self, Action, App};
use ringlab::tui::markdown::{self, RenderOptions};
use ringlab::tui::theme::Theme;

fn lesson_app(w: u16, h: u16) -> App {
    let mut app = App::new(Course::embedded(), Theme::color());
    app::update(&mut app, Action::Resize(w, h));
    app.open_lesson("collectives").expect("lesson");
    app::update(&mut app, Action::Page(1));
    app
}

fn benches(c: &mut Criterion) {
    let app = lesson_app(120, 40);
    let mut term = Terminal::new(TestBackend::new(120, 40)).expect("terminal");
    c.bench_function("lesson_frame_120x40", |b| {
        b.iter(|| {
            term.draw(|f| app::render(black_box(&app), f))
                .expect("draw");
        })
    });

    let course = Course::embedded();
    let body = course
        .lessons()
        .find(|l| l.meta.id == "collectives")
        .expect("lesson")
        .body
        .clone();
    let theme = Theme::color();
    c.bench_function("lesson_layout_width_100", |b| {
        b.iter(|| {
            markdown::render(
                black_box(&body),
                &RenderOptions {
                    width: 100,
                    theme: &theme,
                    raw_tex: false,
                    slides: false,
                },
            )
        })
    });

    // The ring view: N = 16 drawn on a 200x60 terminal, mid-animation.
    let mut ring = App::new(Course::embedded(), Theme::color());
    app::update(&mut ring, Action::Resize(200, 60));
    ring.open_ring(ringlab::tui::screens::ring::RingParams {
        ranks: 16,
        ..Default::default()
    })
    .expect("ring");
    for _ in 0..7 {
        app::update(&mut ring, ringlab::tui::screens::ring::Verb::Step.by(1));
    }
    let mut term200 = Terminal::new(TestBackend::new(200, 60)).expect("terminal");
    c.bench_function("ring_frame_200x60_n16", |b| {
        b.iter(|| {
            term200
                .draw(|f| app::render(black_box(&ring), f))
                .expect("draw");
        })
    });

    c.bench_function("first_frame_120x40", |b| {
        b.iter(|| {
            let app = lesson_app(120, 40);
            let mut term = Terminal::new(TestBackend::new(120, 40)).expect("terminal");
            term.draw(|f| app::render(&app, f)).expect("draw");
        })
    });
}

criterion_group! {
    name = render;
    config = Criterion::default().sample_size(30);
    targets = benches
}
criterion_main!(render);
