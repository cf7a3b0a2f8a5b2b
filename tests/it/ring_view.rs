//! The ring view: snapshots at several steps, exact rewind, and the counters converging to
//! 2(N−1)/N·M.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ringlab::collective::{Algorithm, Collective, Dtype};
use ringlab::course::Course;
use ringlab::course::lesson::{Origin, SourceFile};
use ringlab::tui::app::{self, Action, App, Screen};
use ringlab::tui::screens::ring::RingParams;
use ringlab::tui::theme::Theme;

fn app_with_ring(params: RingParams, w: u16, h: u16) -> App {
    let course = Course::from_sources(Origin::Embedded, Vec::<SourceFile>::new());
    let mut app = App::new(course, Theme::color());
    app::update(&mut app, Action::Resize(w, h));
    app.open_ring(params).expect("ring");
    app
}

fn frame(app: &App) -> String {
    let mut t = Terminal::new(TestBackend::new(app.width, app.height)).expect("terminal");
    t.draw(|f| app::render(app, f)).expect("draw");
    format!("{}", t.backend())
}

fn ring(app: &App) -> &ringlab::tui::screens::ring::RingState {
    match app.stack.last() {
        Some(Screen::Ring(r)) => r,
        _ => panic!("ring view not on top"),
    }
}

#[test]
fn ring_view_step_0_120x40() {
    let app = app_with_ring(RingParams::default(), 120, 40);
    insta::assert_snapshot!(frame(&app));
}

#[test]
fn ring_view_reduce_scatter_step_2_120x40() {
    let mut app = app_with_ring(RingParams::default(), 120, 40);
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Step.by(1));
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Step.by(1));
    let f = frame(&app);
    assert!(f.contains("reduce-scatter s = 1 (step 2 of 3)"), "{f}");
    insta::assert_snapshot!(f);
}

#[test]
fn ring_view_done_80x24_compact() {
    let mut app = app_with_ring(RingParams::default(), 80, 24);
    app::update(&mut app, Action::Bottom);
    let f = frame(&app);
    assert!(f.contains("all-gather s = 2 (step 3 of 3)"), "{f}");
    insta::assert_snapshot!(f);
}

#[test]
fn stepping_forward_then_back_gives_the_first_frame_exactly() {
    let mut app = app_with_ring(RingParams::default(), 120, 40);
    let first = frame(&app);
    for _ in 0..5 {
        app::update(&mut app, ringlab::tui::screens::ring::Verb::Step.by(1));
    }
    assert_ne!(frame(&app), first);
    for _ in 0..5 {
        app::update(&mut app, ringlab::tui::screens::ring::Verb::Step.by(-1));
    }
    assert_eq!(frame(&app), first);
    // Past the ends it clamps.
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Step.by(-1));
    assert_eq!(frame(&app), first);
}

#[test]
fn counters_reach_the_ring_bound_at_the_end() {
    for n in [2usize, 3, 5, 8, 16] {
        let params = RingParams {
            ranks: n,
            bytes: 1 << 20,
            ..RingParams::default()
        };
        let mut app = app_with_ring(params, 120, 40);
        app::update(&mut app, Action::Bottom);
        let r = ring(&app);
        let m = (1u64 << 20) as f64;
        let bound = 2.0 * (n as f64 - 1.0) / n as f64 * m;
        for &sent in &r.sent {
            assert!(
                (sent as f64 - bound).abs() <= 4.0,
                "N={n}: {sent} vs {bound}"
            );
        }
    }
}

#[test]
fn play_advances_on_ticks_and_stops_at_the_end() {
    let mut app = app_with_ring(RingParams::default(), 120, 40);
    assert!(app.tick_interval().is_none(), "idle: no ticks");
    app::update(&mut app, ringlab::tui::screens::ring::Verb::PlayPause.act());
    assert!(app.tick_interval().is_some());
    for _ in 0..20 {
        app::update(&mut app, Action::Tick);
    }
    assert!(ring(&app).at_end());
    assert!(app.tick_interval().is_none(), "stops at the end");
}

#[test]
fn plus_and_minus_change_ranks_and_cycle_keys_change_the_schedule() {
    let mut app = app_with_ring(RingParams::default(), 120, 40);
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Ranks.by(1));
    assert_eq!(ring(&app).params.ranks, 5);
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Ranks.by(-1));
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Ranks.by(-1));
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Ranks.by(-1));
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Ranks.by(-1));
    assert_eq!(ring(&app).params.ranks, 2, "never below 2");
    for _ in 0..16 {
        app::update(&mut app, ringlab::tui::screens::ring::Verb::Ranks.by(1));
    }
    assert!(ring(&app).params.ranks > 16);
    let f = frame(&app);
    assert!(f.contains("drawn up to 16"), "{f}");
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Algo.act());
    assert_eq!(ring(&app).params.algo, Algorithm::Naive);
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Coll.act());
    assert_ne!(ring(&app).params.coll, Collective::AllReduce);
}

#[test]
fn ranks_up_to_1024_keep_exact_numbers() {
    let params = RingParams {
        ranks: 1024,
        bytes: 1 << 30,
        dtype: Dtype::F32,
        ..RingParams::default()
    };
    let mut app = app_with_ring(params, 120, 40);
    app::update(&mut app, Action::Bottom);
    let r = ring(&app);
    let total: u64 = r.sent.iter().sum();
    assert_eq!(total, 2 * 1023 * (1u64 << 30));
}

#[test]
fn naive_view_shows_rank_0_as_the_bottleneck() {
    let params = RingParams {
        algo: Algorithm::Naive,
        ..RingParams::default()
    };
    let mut app = app_with_ring(params, 120, 40);
    app::update(&mut app, Action::Bottom);
    let r = ring(&app);
    assert_eq!(r.traffic.per_rank[0].bytes_received, 3 * (1 << 20));
    assert_eq!(r.traffic.per_rank[0].bytes_sent, 3 * (1 << 20));
}

/// `L` only changes which precomputed estimate is shown: the comparison (its schedules' counts
/// and every link's estimates) stays as it was, and the shown time changes.
#[test]
fn changing_the_link_rebuilds_no_schedule() {
    let mut app = app_with_ring(RingParams::default(), 120, 40);
    let before = ring(&app).compare.clone();
    let shown = frame(&app);
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Link.act());
    assert_eq!(ring(&app).compare, before);
    assert!(
        before
            .iter()
            .all(|c| c.estimates.len() == ringlab::tui::screens::ring::LINK_CHOICES)
    );
    let after = frame(&app);
    let time_row = |f: &str| {
        f.lines()
            .find(|l| l.contains(" ring ") && l.contains('◀'))
            .unwrap_or_default()
            .to_string()
    };
    assert_ne!(time_row(&shown), time_row(&after), "{after}");
}

#[test]
fn a_node_shape_is_kept_while_it_divides_n_and_an_odd_n_says_what_it_chose() {
    let params = RingParams {
        algo: Algorithm::TwoLevel,
        ranks: 8,
        gpus_per_node: 2,
        ..RingParams::default()
    };
    let mut app = app_with_ring(params, 120, 40);
    assert_eq!(ring(&app).schedule.spec().node_size(), 2);
    // 8 → 9: 2 does not divide 9, so the default shape (3 × 3) takes over, and says so.
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Ranks.by(1));
    assert_eq!(ring(&app).params.ranks, 9);
    assert_eq!(ring(&app).params.gpus_per_node, 0);
    assert_eq!(ring(&app).schedule.spec().node_size(), 3);
    let status = app.status.clone().unwrap_or_default();
    assert!(status.contains("3 nodes of 3 GPUs"), "{status}");
    // 9 → 10 (default 2 × 5) and an even N needs no note.
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Ranks.by(1));
    assert_eq!(ring(&app).schedule.spec().node_size(), 5);
    // A shape that does not divide N is refused when the view opens.
    let course = Course::from_sources(Origin::Embedded, Vec::<SourceFile>::new());
    let mut app = App::new(course, Theme::color());
    let bad = RingParams {
        algo: Algorithm::TwoLevel,
        ranks: 8,
        gpus_per_node: 3,
        ..RingParams::default()
    };
    let err = app.open_ring(bad).expect_err("3 does not divide 8");
    assert!(err.to_string().contains("does not divide"), "{err}");
}

/// Before the first step the view says what comes: "first" only where more follows.
#[test]
fn a_single_phase_collective_is_not_said_to_come_first() {
    for (coll, want, not) in [
        (Collective::Broadcast, "ready: broadcast, ", "comes first"),
        (Collective::AllReduce, "comes first", "ready: all-reduce,"),
    ] {
        let params = RingParams {
            coll,
            ranks: 4,
            ..RingParams::default()
        };
        let app = app_with_ring(params, 120, 40);
        let text = ring(&app).phase_text();
        assert!(text.contains(want), "{coll:?}: {text}");
        assert!(!text.contains(not), "{coll:?}: {text}");
    }
}

/// All-to-all's last step swaps chunks across the circle: every chord passes through the
/// middle, where their labels would print over each other (one "c3" standing for eight
/// transfers). Those labels are left out; the line under the header says who sends what.
#[test]
fn all_to_all_says_who_sends_what_without_colliding_labels() {
    let params = RingParams {
        coll: Collective::AllToAll,
        ranks: 8,
        ..RingParams::default()
    };
    let mut app = app_with_ring(params, 100, 32);
    app::update(&mut app, Action::Bottom);
    let text = frame(&app);
    assert!(
        text.contains("R0→R4 c4"),
        "the step line lists the swap:\n{text}"
    );
    // The ring is the left part of each line, before the panel's border.
    let ring_part: String = text
        .lines()
        .skip(4)
        .map(|l| l.split('│').next().unwrap_or(""))
        .collect();
    let label = ring_part
        .as_bytes()
        .windows(2)
        .any(|w| w[0] == b'c' && w[1].is_ascii_digit());
    assert!(!label, "a chord label in the middle of the ring:\n{text}");
}

/// `M` types a message size: the view rebuilds at exactly that size; a size it cannot draw
/// is refused with a reason and the view keeps its size and the text typed.
#[test]
fn a_typed_message_size_rebuilds_the_view_and_a_bad_one_is_refused() {
    use ringlab::tui::field::InputRequest;
    let mut app = app_with_ring(RingParams::default(), 80, 24);
    let type_text = |app: &mut App, text: &str| {
        app::update(app, ringlab::tui::screens::ring::Verb::TypeSize.act());
        for c in text.chars() {
            app::update(app, Action::Edit(InputRequest::InsertChar(c)));
        }
    };
    type_text(&mut app, "3 MiB");
    let f = frame(&app);
    assert!(f.contains("message size> 3 MiB"));
    // While typing, the hint bar names the field's keys, not the view's.
    let bar = f.lines().last().unwrap_or_default();
    assert!(bar.contains("Enter sets the size  Esc cancel"), "{bar}");
    assert!(!bar.contains("play/pause"), "{bar}");
    app::update(&mut app, Action::InputSubmit);
    assert_eq!(ring(&app).params.bytes, 3 << 20);
    assert!(ring(&app).typing.is_none());
    assert!(frame(&app).contains("M = 3 MiB (786432 × f32)"));
    type_text(&mut app, "5 GiB");
    app::update(&mut app, Action::InputSubmit);
    assert_eq!(ring(&app).params.bytes, 3 << 20, "the size is kept");
    assert!(ring(&app).typing.is_some(), "the text stays to mend");
    let f = frame(&app);
    assert!(f.contains("5 GiB is more than the view draws"), "{f}");
    app::update(&mut app, Action::InputCancel);
    assert!(ring(&app).typing.is_none());
    type_text(&mut app, "2");
    app::update(&mut app, Action::InputSubmit);
    assert!(
        app.status
            .as_deref()
            .is_some_and(|s| s.contains("less than one 4-byte element"))
    );
}

/// The link's note sits under the comparison table and changes with `L` (it used to replace
/// the hint bar, cut); all-to-all names its one pattern in words.
#[test]
fn the_link_note_sits_under_the_table_and_all_to_all_has_one_schedule() {
    let mut app = app_with_ring(RingParams::default(), 80, 24);
    let f = frame(&app);
    assert!(f.contains("Same N and M, six ways"), "{f}");
    assert!(
        f.contains(" NVLink 4: 450 GB/s each way (H100 datasheet); 2 µs/step assumed"),
        "{f}"
    );
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Link.act());
    let f = frame(&app);
    assert!(
        f.contains(" PCIe 5 x16: ~64 GB/s each way, theoretical; 3 µs/step assumed"),
        "{f}"
    );
    assert!(app.status.is_none(), "{:?}", app.status);
    assert!(f.contains("more: ?"), "the hint bar stays: {f}");
    let app = app_with_ring(
        RingParams {
            coll: Collective::AllToAll,
            ..RingParams::default()
        },
        80,
        24,
    );
    let f = frame(&app);
    assert!(f.contains("Same N and M, one schedule"), "{f}");
    assert!(f.contains(" pairwise "), "{f}");
    assert!(!f.contains(" ring "), "{f}");
}

/// At exactly 100x32 the legend is whole (two rows in the panel), two-level names its shape,
/// the comparison says what ◀ marks and which algorithm is fastest, and a playing view's state
/// fits its row at 80 columns (L18, L19, M8).
#[test]
fn legend_shape_and_marks_are_whole_at_100x32_and_80x24() {
    let app = app_with_ring(RingParams::default(), 100, 32);
    let f = frame(&app);
    assert!(f.contains("· nothing yet  0-f that rank's own data"), "{f}");
    assert!(f.contains("Σk sum of k ranks  ■ all N"), "{f}");
    assert!(f.contains("◀ drawn above · fastest: "), "{f}");
    let two = RingParams {
        algo: Algorithm::TwoLevel,
        ..RingParams::default()
    };
    let app = app_with_ring(two, 120, 40);
    assert!(
        frame(&app).contains("two-level, 2 nodes × 2 GPUs"),
        "{}",
        frame(&app)
    );
    let mut app = app_with_ring(RingParams::default(), 80, 24);
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Step.by(1));
    app::update(&mut app, ringlab::tui::screens::ring::Verb::PlayPause.act());
    let f = frame(&app);
    let row = f
        .lines()
        .find(|l| l.contains("ms/step"))
        .unwrap_or_default();
    assert!(
        !row.contains("playing (") || row.contains("ms/step)"),
        "the state is whole on its row:\n{f}"
    );
}

/// A narrated caption (presenter mode) that wraps at 80 columns goes on under its first word,
/// not at column 0 (L6).
#[test]
fn a_wrapped_caption_keeps_its_indent() {
    let mut app = app_with_ring(RingParams::default(), 80, 24);
    if let Some(Screen::Ring(r)) = app.stack.last_mut() {
        r.narrate = true;
    }
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Step.by(1));
    app::update(&mut app, ringlab::tui::screens::ring::Verb::Step.by(1));
    let caption = ring(&app).caption.clone();
    assert!(
        caption.chars().count() > 80,
        "a caption long enough to wrap: {caption}"
    );
    let f = frame(&app);
    let first: String = caption.chars().take(20).collect();
    let lines: Vec<&str> = f.lines().map(|l| l.trim_matches('"')).collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(&format!(" {first}")))
        .unwrap_or_else(|| panic!("the caption is shown:\n{f}"));
    assert!(
        lines[at + 1].starts_with(' ') && !lines[at + 1].trim().is_empty(),
        "its second row is indented:\n{f}"
    );
    // And every word of it is on screen.
    for w in caption.split_whitespace() {
        assert!(f.contains(w), "{w} is cut:\n{f}");
    }
}
