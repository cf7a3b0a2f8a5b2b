//! Whole-screen snapshots through ratatui's TestBackend, plus style assertions where colour or
//! modifiers carry meaning.

use ringlab::tui::field::InputRequest;
use std::path::Path;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::{Color, Modifier};
use ringlab::course::Course;
use ringlab::tui::app::{self, Action, App};
use ringlab::tui::theme::Theme;

fn fixture_app(theme: Theme) -> App {
    let course = Course::from_dir(Path::new("tests/fixtures/tui")).expect("fixture course");
    App::new(course, theme)
}

fn draw(app: &mut App, w: u16, h: u16) -> Terminal<TestBackend> {
    app::update(app, Action::Resize(w, h));
    let mut t = Terminal::new(TestBackend::new(w, h)).expect("terminal");
    t.draw(|f| app::render(app, f)).expect("draw");
    t
}

#[test]
fn course_map_80x24() {
    let mut app = fixture_app(Theme::color());
    let t = draw(&mut app, 80, 24);
    insta::assert_snapshot!(t.backend());
}

/// A wide terminal gives the lesson's details the room the list does not need (objectives
/// wrapped at ~80 columns at 200x60 was the bug); at 80x24 a wrapped objective keeps its
/// indent and what does not fit says so.
#[test]
fn course_map_objectives_use_the_width_and_keep_their_indent() {
    let mut app = App::new(Course::embedded(), Theme::color());
    let text = format!("{}", draw(&mut app, 200, 60).backend());
    assert!(
        text.contains(
            "• Predict each rank's buffer after all-reduce, all-gather, reduce-scatter, \
             broadcast, reduce and send/recv"
        ),
        "{text}"
    );
    let mut app = App::new(Course::embedded(), Theme::color());
    let text = format!("{}", draw(&mut app, 80, 24).backend());
    assert!(text.contains("│ • Say what a collective is and"), "{text}");
    assert!(
        text.contains("│   why every rank has to make the"),
        "{text}"
    );
    assert!(text.contains("│ … more: Enter opens the lesson"), "{text}");
    assert!(
        text.contains("✓ read, quiz passed  ● read, quiz to do"),
        "{text}"
    );
    // The hang lab's progress is on the map too: a solved scenario counts, a name no
    // scenario has does not.
    let lessons = Course::embedded().entries.len();
    let scenarios = ringlab::lab::hang::scenario::all().0.len();
    let steps = app
        .planner()
        .steps(ringlab::study::track::TrackId::Course)
        .len();
    assert!(
        text.contains(&format!(
            " 0 of {lessons} lessons done · course 0/{steps} (T) · hang lab 0/{scenarios} solved (H)"
        )),
        "{text}"
    );
    app.progress
        .labs
        .entry("docker0".into())
        .or_default()
        .solved = true;
    app.progress
        .labs
        .entry("no-such-scenario".into())
        .or_default()
        .solved = true;
    let text = format!("{}", draw(&mut app, 80, 24).backend());
    assert!(
        text.contains(&format!("hang lab 1/{scenarios} solved")),
        "{text}"
    );
}

#[test]
fn course_map_shipped_course_120x40() {
    let mut app = App::new(Course::embedded(), Theme::color());
    let t = draw(&mut app, 120, 40);
    let text = format!("{}", t.backend());
    assert!(text.contains("The collectives"), "{text}");
    assert!(text.contains("Ring all-reduce"), "{text}");
}

#[test]
fn lesson_80x24() {
    let mut app = fixture_app(Theme::color());
    app.open_lesson("sample").expect("lesson");
    let t = draw(&mut app, 80, 24);
    insta::assert_snapshot!(t.backend());
}

#[test]
fn lesson_120x40() {
    let mut app = fixture_app(Theme::color());
    app.open_lesson("sample").expect("lesson");
    let t = draw(&mut app, 120, 40);
    insta::assert_snapshot!(t.backend());
}

#[test]
fn lesson_next_section_jumps_to_the_heading() {
    let mut app = fixture_app(Theme::color());
    app.open_lesson("sample").expect("lesson");
    app::update(&mut app, Action::Resize(80, 24));
    app::update(&mut app, ringlab::tui::screens::lesson::Verb::Section.by(1));
    app::update(&mut app, ringlab::tui::screens::lesson::Verb::Section.by(1));
    let t = draw(&mut app, 80, 24);
    insta::assert_snapshot!(t.backend());
}

#[test]
fn search_finds_and_scrolls_to_the_match() {
    let mut app = fixture_app(Theme::color());
    app.open_lesson("sample").expect("lesson");
    app::update(&mut app, Action::Resize(80, 24));
    app::update(&mut app, ringlab::tui::screens::lesson::Verb::Search.act());
    for c in "needle".chars() {
        app::update(&mut app, Action::Edit(InputRequest::InsertChar(c)));
    }
    app::update(&mut app, Action::InputSubmit);
    let t = draw(&mut app, 80, 24);
    let buf = t.backend().buffer();
    // The match is on screen and styled as a search hit (the hint bar's last row keeps the
    // search summary, which names the query too).
    let mut found = false;
    for y in 0..buf.area.height - 1 {
        let row: String = (0..buf.area.width)
            .map(|x| buf[(x, y)].symbol().to_string())
            .collect();
        if let Some(col) = row.find("needle") {
            let x = row[..col].chars().count() as u16;
            assert_eq!(buf[(x, y)].bg, Color::Yellow, "hit highlighted");
            found = true;
        }
    }
    assert!(found, "needle on screen:\n{}", t.backend());
}

/// `/` on the course map searches the course: the prompt opens in the selected lesson and a
/// word only a later lesson has takes the learner there, at the match.
#[test]
fn slash_on_the_map_searches_the_whole_course() {
    use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
    let course = Course::from_dir(Path::new("lessons")).expect("the course");
    // A word lesson 1 lacks and a later lesson has.
    let word = "Duplicate GPU";
    let first = course
        .entries
        .iter()
        .position(|e| e.lesson.as_ref().is_some_and(|l| l.body.contains(word)))
        .expect("some lesson mentions it");
    assert!(first > 0, "lesson 1 must not have it for this test");
    let mut app = App::new(course, Theme::color());
    app::update(&mut app, Action::Resize(100, 30));
    let slash = ringlab::tui::map_event(
        &app,
        &Event::Key(KeyEvent::new(KeyCode::Char('/'), KeyModifiers::NONE)),
    )
    .expect("/ is bound on the map");
    app::update(&mut app, slash);
    assert!(app.prompt_open(), "the search prompt is open");
    for c in word.chars() {
        app::update(&mut app, Action::Edit(InputRequest::InsertChar(c)));
    }
    app::update(&mut app, Action::InputSubmit);
    assert_eq!(app.stack.len(), 2);
    let Some(app::Screen::Lesson(l)) = app.stack.last() else {
        panic!("a lesson is open");
    };
    assert_eq!(l.entry, first, "the first lesson that has the word");
    assert!(l.search.current.is_some(), "at a match");
    assert!(
        app.status.as_deref().is_some_and(|s| s.contains(word)),
        "{:?}",
        app.status
    );
}

/// Esc with a search active clears it (as in less and vim) and stays in the lesson; a second
/// Esc, or q, leaves.
#[test]
fn esc_clears_an_active_search_before_it_leaves_the_lesson() {
    use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
    let key = |c| Event::Key(KeyEvent::new(c, KeyModifiers::NONE));
    let mut app = fixture_app(Theme::color());
    app.open_lesson("sample").expect("lesson");
    app::update(&mut app, Action::Resize(80, 24));
    app::update(&mut app, ringlab::tui::screens::lesson::Verb::Search.act());
    for c in "needle".chars() {
        app::update(&mut app, Action::Edit(InputRequest::InsertChar(c)));
    }
    app::update(&mut app, Action::InputSubmit);
    assert_eq!(app.stack.len(), 2);
    let esc = ringlab::tui::map_event(&app, &key(KeyCode::Esc)).expect("Esc is bound");
    app::update(&mut app, esc);
    assert_eq!(
        app.stack.len(),
        2,
        "the first Esc clears the search, not the lesson"
    );
    assert!(
        app.status
            .as_deref()
            .is_some_and(|s| s.contains("search cleared")),
        "{:?}",
        app.status
    );
    let esc = ringlab::tui::map_event(&app, &key(KeyCode::Esc)).expect("Esc is bound");
    app::update(&mut app, esc);
    assert_eq!(app.stack.len(), 1, "with no search, Esc leaves");
    // q leaves even with a search active.
    app.open_lesson("sample").expect("lesson");
    app::update(&mut app, ringlab::tui::screens::lesson::Verb::Search.act());
    app::update(&mut app, Action::Edit(InputRequest::InsertChar('n')));
    app::update(&mut app, Action::InputSubmit);
    let q = ringlab::tui::map_event(&app, &key(KeyCode::Char('q'))).expect("q is bound");
    app::update(&mut app, q);
    assert_eq!(app.stack.len(), 1);
}

#[test]
fn help_overlay_lists_the_same_keys_as_the_hint_bar() {
    let mut app = fixture_app(Theme::color());
    app.open_lesson("sample").expect("lesson");
    app::update(&mut app, Action::Help);
    let t = draw(&mut app, 80, 24);
    // The overlay scrolls (j/k) when the keys do not fit, and says so: read both pages.
    let mut text = format!("{}", t.backend());
    assert!(text.contains("↓ more: j"), "{text}");
    app::update(&mut app, Action::Move(30));
    text.push_str(&format!("{}", draw(&mut app, 80, 24).backend()));
    app::update(&mut app, Action::Move(-30));
    for b in ringlab::tui::screens::lesson::KEYS {
        assert!(
            text.contains(b.desc),
            "overlay misses `{}`:\n{text}",
            b.desc
        );
    }
    insta::assert_snapshot!(t.backend());
}

#[test]
fn too_small_terminal_says_so() {
    let mut app = fixture_app(Theme::color());
    let t = draw(&mut app, 60, 20);
    let text = format!("{}", t.backend());
    assert!(
        text.contains("terminal too small: need 80x24, have 60x20"),
        "{text}"
    );
}

#[test]
fn no_color_selection_is_reverse_video_with_a_marker() {
    let mut app = fixture_app(Theme::mono());
    let t = draw(&mut app, 80, 24);
    let buf = t.backend().buffer();
    let row: String = (0..80).map(|x| buf[(x, 3)].symbol().to_string()).collect();
    assert!(row.starts_with("▶"), "selection marker: {row:?}");
    for y in 0..24 {
        for x in 0..80 {
            let c = &buf[(x, y)];
            assert!(
                matches!(c.fg, Color::Reset),
                "no colour under NO_COLOR at {x},{y}"
            );
            assert!(
                matches!(c.bg, Color::Reset),
                "no colour under NO_COLOR at {x},{y}"
            );
        }
    }
    assert!(buf[(2, 3)].modifier.contains(Modifier::REVERSED));
}

#[test]
fn colour_selection_has_a_background() {
    let mut app = fixture_app(Theme::color());
    let t = draw(&mut app, 80, 24);
    assert_eq!(t.backend().buffer()[(2, 3)].bg, Color::Cyan);
}

#[test]
fn back_from_lesson_returns_to_map_and_back_again_quits() {
    let mut app = fixture_app(Theme::color());
    app.open_lesson("sample").expect("lesson");
    app::update(&mut app, Action::Back);
    assert_eq!(app.stack.len(), 1);
    assert!(!app.quit);
    app::update(&mut app, Action::Back);
    assert!(app.quit);
}

/// Esc out of a screen, then Esc again on the map: the map stays and says how to quit; its
/// hint bar says "q quit", not "back".
#[test]
fn esc_on_the_map_does_not_quit() {
    use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
    let mut app = fixture_app(Theme::color());
    app.open_lesson("sample").expect("lesson");
    let esc = Event::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    for _ in 0..2 {
        let a = ringlab::tui::map_event(&app, &esc).expect("Esc is bound");
        app::update(&mut app, a);
    }
    assert!(!app.quit);
    assert_eq!(app.stack.len(), 1);
    assert_eq!(
        app.status.as_deref(),
        Some("q quits ringlab (Esc does not, here)")
    );
    let bar = hint_line(&draw(&mut app, 80, 24));
    assert!(bar.contains("q quit"), "{bar}");
    let q = Event::Key(KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE));
    let a = ringlab::tui::map_event(&app, &q).expect("q is bound");
    app::update(&mut app, a);
    assert!(app.quit);
}

#[test]
fn reading_every_screen_long_enough_marks_the_lesson_done() {
    use std::time::{Duration, Instant};
    let mut app = fixture_app(Theme::color());
    app.open_lesson("sample").expect("lesson");
    let t = Instant::now();
    app::update_at(&mut app, Action::Resize(80, 24), t);
    // Two minutes on each of its two screens (the floor is 600 words a minute).
    app::update_at(&mut app, Action::Bottom, t + Duration::from_secs(120));
    app::update_at(&mut app, Action::Back, t + Duration::from_secs(240));
    let t = draw(&mut app, 80, 24);
    let text = format!("{}", t.backend());
    assert!(text.contains("✓  1. A sample lesson"), "{text}");
}

#[test]
fn unknown_lesson_id_lists_the_known_ones() {
    let mut app = fixture_app(Theme::color());
    let known = app.open_lesson("nope").expect_err("unknown");
    assert_eq!(known, vec!["sample".to_string(), "second".to_string()]);
}

#[test]
fn hang_lab_lists_the_scenarios_with_the_selected_story() {
    let mut app = fixture_app(Theme::color());
    app.stack.push(ringlab::tui::app::Screen::Hang(Box::new(
        ringlab::tui::screens::hang::HangState::new(),
    )));
    let t = draw(&mut app, 100, 30);
    let text = format!("{}", t.backend());
    let (scenarios, _) = ringlab::lab::hang::scenario::all();
    assert!(!scenarios.is_empty());
    for name in scenarios.iter().map(|s| s.name.as_str()) {
        assert!(text.contains(name), "{name} listed:\n{text}");
    }
    assert!(text.contains("▶   Pinned to docker0"), "{text}");
    // Blind mode (b): numbered scenarios and the brief, nothing that names the cause.
    app::update(
        &mut app,
        ringlab::tui::screens::hang::Verb::ToggleBlind.act(),
    );
    let t = draw(&mut app, 100, 30);
    let blind = format!("{}", t.backend());
    assert!(blind.contains("▶   Scenario 1"), "{blind}");
    assert!(blind.contains("Scenario 7"), "{blind}");
    for giveaway in ["docker0", "NCCL_SOCKET_IFNAME", "Pinned", "lo-across"] {
        assert!(
            !blind.contains(giveaway),
            "blind mode shows {giveaway}:\n{blind}"
        );
    }
    assert!(
        blind.contains("container guide"),
        "the brief is shown:\n{blind}"
    );
    app::update(
        &mut app,
        ringlab::tui::screens::hang::Verb::ToggleBlind.act(),
    );
    // The screen says where the nodes will run before anything is staged.
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let says = if root {
        "real network namespaces"
    } else {
        "EMULATED"
    };
    assert!(text.contains(says), "{text}");
}

#[test]
fn live_lab_offers_the_nccl_backend_as_a_field() {
    let mut app = fixture_app(Theme::color());
    app.stack.push(ringlab::tui::app::Screen::Lab(Box::new(
        ringlab::tui::screens::lab::LabState::new(Default::default()),
    )));
    let t = draw(&mut app, 140, 30);
    let text = format!("{}", t.backend());
    assert!(text.contains("backend:  tcp"), "{text}");
    // The last field (one step back from the first) is the backend; → switches it.
    app::update(&mut app, Action::Move(-1));
    app::update(&mut app, Action::Adjust(1));
    let t = draw(&mut app, 140, 30);
    let text = format!("{}", t.backend());
    assert!(text.contains("backend:  nccl"), "{text}");
    assert!(
        text.contains("▶backend:"),
        "the focused field is marked: {text}"
    );
}

#[test]
fn hang_lab_lets_the_learner_type_a_fix() {
    use ringlab::lab::hang::scenario::{Diagnosis, LabReport, Outcome, Staged};
    use ringlab::tui::screens::hang::{HangState, Stage};
    let mut app = fixture_app(Theme::color());
    let mut h = HangState::new();
    h.stage = Stage::Diagnosed;
    h.report = Some(LabReport {
        scenario: "docker0".into(),
        mode: ringlab::lab::hang::cluster::ClusterMode::Netns,
        emulated_because: None,
        staged: Staged {
            outcome: Outcome::Hang,
            stuck_phase: Some("connect to 172.17.0.1:4000".into()),
            detected_after_s: Some(6.1),
            run_s: 6.2,
            ranks: Vec::new(),
            reason: None,
            transport: None,
        },
        diagnosis: Diagnosis::default(),
        fixed: None,
        commands: Vec::new(),
    });
    app.stack.push(ringlab::tui::app::Screen::Hang(Box::new(h)));
    let t = draw(&mut app, 100, 40);
    assert!(format!("{}", t.backend()).contains("or e to type one"));
    app::update(&mut app, ringlab::tui::screens::hang::Verb::TypeFix.act());
    assert!(app.prompt_open(), "typing takes the keys");
    for c in "NCCL_SOCKET_IFNAME".chars() {
        app::update(&mut app, Action::Edit(InputRequest::InsertChar(c)));
    }
    // Not an assignment: a clear message, and the typing stays open.
    app::update(&mut app, Action::InputSubmit);
    assert!(
        app.status
            .as_deref()
            .unwrap_or("")
            .contains("expected NAME=value"),
        "{:?}",
        app.status
    );
    assert!(app.prompt_open());
    for c in "=eth0".chars() {
        app::update(&mut app, Action::Edit(InputRequest::InsertChar(c)));
    }
    let t = draw(&mut app, 100, 40);
    assert!(
        format!("{}", t.backend()).contains("fix> NCCL_SOCKET_IFNAME=eth0"),
        "{}",
        t.backend()
    );
    app::update(&mut app, Action::InputSubmit);
    assert!(!app.prompt_open(), "submitted");
}

/// The last line of a rendered frame (the hint bar).
fn hint_line(t: &Terminal<TestBackend>) -> String {
    let text = format!("{}", t.backend());
    text.lines().last().unwrap_or_default().to_string()
}

/// The hint bar shows what matters most first and says visibly that more is under `?`; at
/// 80x24 the course map's long titles end in an ellipsis instead of being cut mid-word.
#[test]
fn hint_bars_put_the_main_keys_first_and_fold_the_rest_into_help() {
    let mut app = App::new(Course::embedded(), Theme::color());
    let t = draw(&mut app, 80, 24);
    let bar = hint_line(&t);
    // The map is the root: q quits it (Esc does not).
    for k in ["Enter open", "Q quiz", "D drill", "more: ?", "q quit"] {
        assert!(bar.contains(k), "{k} missing from {bar:?}");
    }
    let text = format!("{}", t.backend());
    assert!(
        text.contains('…'),
        "long titles end in an ellipsis:\n{text}"
    );
    // Wide enough, every key of the course map is on the bar, the mock interview included.
    let t = draw(&mut app, 200, 40);
    let bar = hint_line(&t);
    for k in [
        "Q quiz",
        "D drill",
        "S stats",
        "H hang lab",
        "B live lab",
        "t TP calc",
        "p planner",
        "M mock interview",
        "r ring view",
    ] {
        assert!(bar.contains(k), "{k} missing from {bar:?}");
    }
    assert!(!bar.contains("more: ?"), "{bar:?}");
    app::update(&mut app, ringlab::tui::screens::home::Verb::Mock.act());
    assert!(
        matches!(app.stack.last(), Some(ringlab::tui::app::Screen::Quiz(_))),
        "M opens the mock interview"
    );
    // The ring view at 80x24: the link key is named on screen, the rest folds into `?`.
    let mut app = App::new(Course::embedded(), Theme::color());
    app::update(
        &mut app,
        Action::OpenScreen(ringlab::tui::app::ScreenId::Ring),
    );
    let t = draw(&mut app, 80, 24);
    let text = format!("{}", t.backend());
    assert!(text.contains("(L: link)"), "{text}");
    let bar = hint_line(&t);
    assert!(
        bar.contains("Space play/pause") && bar.contains("more: ?"),
        "{bar:?}"
    );
}

/// `→ rank` can be followed: f selects the link, Enter opens the glossary at its entry, q
/// comes back to the lesson where the reader was.
#[test]
fn glossary_links_are_followed_and_q_comes_back() {
    use ringlab::tui::app::Screen;
    let mut app = App::new(Course::embedded(), Theme::color());
    app::update(&mut app, Action::Resize(100, 30));
    app.open_lesson("collectives").expect("lesson");
    app::update(&mut app, Action::Move(10));
    app::update(&mut app, ringlab::tui::screens::lesson::Verb::Link.by(1));
    let status = app.status.clone().unwrap_or_default();
    assert!(status.contains("11-glossary.md#"), "{status}");
    let t = draw(&mut app, 100, 30);
    assert!(format!("{}", t.backend()).contains('→'));
    app::update(&mut app, Action::Open);
    let (id, top) = match app.stack.last() {
        Some(Screen::Lesson(l)) => (l.id.clone(), l.plain.get(l.scroll).cloned()),
        _ => panic!("a lesson on top"),
    };
    assert_eq!(id.as_deref(), Some("glossary"));
    let anchor = status
        .split("11-glossary.md#")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .unwrap_or_default()
        .to_string();
    let heading = top.unwrap_or_default();
    assert_eq!(
        ringlab::tui::markdown::slug(heading.trim_start_matches(['#', ' '])),
        anchor,
        "the glossary opens at the linked entry: {heading:?}"
    );
    app::update(&mut app, Action::Back);
    match app.stack.last() {
        Some(Screen::Lesson(l)) => {
            assert_eq!(l.id.as_deref(), Some("collectives"));
            assert_eq!(l.scroll, 10, "back where the reader was");
        }
        _ => panic!("back to the lesson"),
    }
}

/// `/` searches this lesson and counts matches in the others; n past the last match goes on
/// to the next lesson that has the text.
#[test]
fn search_counts_matches_across_the_course_and_moves_on() {
    use ringlab::tui::app::Screen;
    use ringlab::tui::field::InputRequest;
    let mut app = App::new(Course::embedded(), Theme::color());
    app::update(&mut app, Action::Resize(100, 30));
    app.open_lesson("collectives").expect("lesson");
    app::update(&mut app, ringlab::tui::screens::lesson::Verb::Search.act());
    for c in "docker0".chars() {
        app::update(&mut app, Action::Edit(InputRequest::InsertChar(c)));
    }
    app::update(&mut app, Action::InputSubmit);
    let status = app.status.clone().unwrap_or_default();
    assert!(
        status.contains("other lesson"),
        "matches elsewhere are counted: {status}"
    );
    let mut seen = vec!["collectives".to_string()];
    for _ in 0..40 {
        app::update(&mut app, ringlab::tui::screens::lesson::Verb::Match.by(1));
        if let Some(Screen::Lesson(l)) = app.stack.last()
            && let Some(id) = &l.id
            && !seen.contains(id)
        {
            assert!(!l.search.hits.is_empty(), "{id} has the text");
            seen.push(id.clone());
        }
    }
    assert!(seen.len() >= 2, "n moved on to other lessons: {seen:?}");
    assert_eq!(app.stack.len(), 2, "one lesson screen, replaced in place");
}

/// The live lab at 80x24 and 120x40: every field on screen (the backend too), the in-place
/// #wrong column whole, a legend that says which line is in place and a y axis with ticks;
/// while ranks run the hint bar offers cancelling, not running; a changed field after a
/// cancelled run clears the verdict.
#[test]
fn live_lab_layout_at_80x24_and_120x40() {
    use ringlab::collective::Collective;
    use ringlab::lab::bench::Row;
    use ringlab::tui::screens::lab::{LabState, RunState};
    let row = |in_place: bool, size: u64, busbw: f64, wrong: u64| Row {
        coll: Collective::AllReduce,
        backend: "tcp",
        algo: "ring".into(),
        ranks: 4,
        size,
        count: size / 4,
        dtype: "float",
        redop: "sum",
        root: -1,
        in_place,
        time_us: 123.4,
        algbw_gbps: busbw,
        busbw_gbps: busbw,
        wrong: Some(wrong),
        transport: Some(ringlab::comm::cpu::tcp::Transports::only(
            ringlab::comm::cpu::tcp::Transport::Shm,
        )),
        shared_gpu: false,
        spread: None,
    };
    for (w, h) in [(80u16, 24u16), (120, 40)] {
        let mut app = fixture_app(Theme::color());
        let mut lab = LabState::new(Default::default());
        for (k, size) in [1u64 << 10, 1 << 14, 1 << 18, 1 << 22]
            .into_iter()
            .enumerate()
        {
            lab.rows.push((
                row(false, size, 1.5 * (k + 1) as f64, 0),
                row(true, size, 1.25 * (k + 1) as f64, 7),
            ));
        }
        app.stack
            .push(ringlab::tui::app::Screen::Lab(Box::new(lab)));
        let text = format!("{}", draw(&mut app, w, h).backend());
        for want in [
            "coll:",
            "min:",
            "max:",
            "backend:",
            "out-of-place",
            "in-place",
        ] {
            assert!(text.contains(want), "{w}x{h}: {want} missing:\n{text}");
        }
        let row_line = text
            .lines()
            .find(|l| l.contains("4 MiB") && l.contains("123.4"))
            .unwrap_or_else(|| panic!("{w}x{h}: no 4 MiB row:\n{text}"));
        let (_, inp) = row_line.split_once('│').expect("two halves");
        assert!(
            inp.contains(" 7 "),
            "{w}x{h}: the in-place #wrong is whole: {row_line}"
        );
        // The legend box only where the chart has room for it: at 80 columns the lines were
        // drawn through it. There the table's header, in the lines' colours, is the legend.
        assert_eq!(
            text.contains("│out-of-place│"),
            w >= 120,
            "{w}x{h}: legend box:\n{text}"
        );
        insta::assert_snapshot!(format!("live_lab_{w}x{h}"), text);
        // Without colour the box cannot tell the lines apart: the title names their marks.
        let mut app = fixture_app(Theme::mono());
        let mut lab = LabState::new(Default::default());
        lab.rows
            .push((row(false, 1 << 20, 1.5, 0), row(true, 1 << 20, 1.25, 0)));
        app.stack
            .push(ringlab::tui::app::Screen::Lab(Box::new(lab)));
        let text = format!("{}", draw(&mut app, w, h).backend());
        assert!(
            text.contains("⣿ out") && text.contains("• in"),
            "{w}x{h}:\n{text}"
        );
        assert!(!text.contains("│out-of-place│"), "{w}x{h}:\n{text}");
    }
    // Running: the hint bar offers to cancel, not to run.
    let mut app = fixture_app(Theme::color());
    let mut lab = LabState::new(Default::default());
    lab.state = RunState::Running;
    app.stack
        .push(ringlab::tui::app::Screen::Lab(Box::new(lab)));
    let text = format!("{}", draw(&mut app, 80, 24).backend());
    let bar = text.lines().last().unwrap_or("");
    assert!(bar.contains("cancel the run"), "{bar}");
    assert!(
        !bar.contains("run on real") && !bar.contains("back"),
        "{bar}"
    );
    // Cancelled, then a field changes: the verdict goes.
    let Some(ringlab::tui::app::Screen::Lab(l)) = app.stack.last_mut() else {
        unreachable!()
    };
    l.state = RunState::Cancelled;
    app::update(&mut app, Action::Adjust(1));
    let Some(ringlab::tui::app::Screen::Lab(l)) = app.stack.last() else {
        unreachable!()
    };
    assert_eq!(l.state, RunState::Idle);
}

/// A status longer than the 80-column bar ends at a whole word with an ellipsis and names the
/// key that shows it whole; `m` shows it whole, and the message stays there after the bar
/// has moved on.
#[test]
fn a_long_status_is_cut_at_a_word_at_80_columns() {
    let mut app = fixture_app(Theme::color());
    app.status = Some(
        "“ring”: match 2 of 9 here · 31 in 5 other lessons (n past the last goes on to them) and more words here"
            .into(),
    );
    let text = format!("{}", draw(&mut app, 80, 24).backend());
    let bar = text
        .lines()
        .last()
        .unwrap_or("")
        .trim_matches('"')
        .trim_end();
    let bar = bar
        .strip_suffix("  m: whole")
        .unwrap_or_else(|| panic!("{bar}"));
    assert!(bar.ends_with('…'), "{bar}");
    // The key named is the key: the messages open whole, and close again.
    app::update(&mut app, Action::Messages);
    let shown = format!("{}", draw(&mut app, 80, 24).backend());
    assert!(shown.contains("Messages"), "{shown}");
    assert!(shown.contains("and more words here"), "{shown}");
    app::update(&mut app, Action::Messages);
    assert!(app.help.is_none());
    let before = bar.trim_end_matches('…');
    let last_word = before.rsplit(' ').next().unwrap_or("");
    assert!(
        "“ring”: match 2 of 9 here · 31 in 5 other lessons (n past the last goes on to them) and more words here"
            .split(' ')
            .any(|w| w == last_word),
        "cut mid-word: {bar}"
    );
}
