//! The TP calculator and the launch planner screens: snapshots at 80x24 and 120x40, field
//! editing, and opening them from the course map and from ```tp / ```plan blocks in a lesson.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ringlab::course::Course;
use ringlab::course::lesson::{Origin, SourceFile};
use ringlab::infer::Backend;
use ringlab::tui::app::{self, Action, App, Screen};
use ringlab::tui::keys;
use ringlab::tui::screens::{planner::PlannerState, tpcalc::TpCalcState};
use ringlab::tui::theme::Theme;

fn app_with(sources: Vec<SourceFile>, w: u16, h: u16) -> App {
    let course = Course::from_sources(Origin::Embedded, sources);
    let mut app = App::new(course, Theme::color());
    app::update(&mut app, Action::Resize(w, h));
    app
}

fn frame(app: &App) -> String {
    let mut t = Terminal::new(TestBackend::new(app.width, app.height)).expect("terminal");
    t.draw(|f| app::render(app, f)).expect("draw");
    format!("{}", t.backend())
}

fn tpcalc(w: u16, h: u16) -> App {
    let mut app = app_with(Vec::new(), w, h);
    let tp = TpCalcState::new("llama-3.1-70b", 8, 1).expect("tp calculator");
    app.stack.push(tp.into());
    app
}

fn planner(w: u16, h: u16) -> App {
    let mut app = app_with(Vec::new(), w, h);
    let plan = PlannerState::new("llama-3.1-70b", 2, 8, Backend::Mp).expect("planner");
    app.stack.push(plan.into());
    app
}

fn key(app: &App, c: KeyCode) -> Action {
    keys::lookup(
        &app.key_tables(),
        &app.contexts(),
        &KeyEvent::new(c, KeyModifiers::NONE),
    )
    .expect("bound key")
}

#[test]
fn tpcalc_llama_70b_tp8_80x24() {
    let app = tpcalc(80, 24);
    let f = frame(&app);
    for want in ["16384 B", "160 (2 × 80 layers)", "28672 B", "NVLink 4"] {
        assert!(f.contains(want), "missing {want}:\n{f}");
    }
    insta::assert_snapshot!(f);
}

#[test]
fn tpcalc_llama_70b_tp8_120x40() {
    let app = tpcalc(120, 40);
    insta::assert_snapshot!(frame(&app));
}

#[test]
fn planner_llama_70b_2x8_80x24() {
    let app = planner(80, 24);
    let f = frame(&app);
    assert!(f.contains("TP 8 × PP 2 = 16 GPUs"), "{f}");
    insta::assert_snapshot!(f);
}

#[test]
fn planner_llama_70b_2x8_120x40() {
    let app = planner(120, 40);
    insta::assert_snapshot!(frame(&app));
}

#[test]
fn arrows_change_the_focused_field_and_the_numbers_follow() {
    let mut app = tpcalc(120, 40);
    // j: focus the TP degree; →: 8 → 12, which does not divide 64 heads.
    let down = key(&app, KeyCode::Char('j'));
    app::update(&mut app, down);
    let right = key(&app, KeyCode::Right);
    assert_eq!(right, Action::Adjust(1));
    app::update(&mut app, right);
    let f = frame(&app);
    assert!(f.contains("◀ 12 ▶"), "{f}");
    assert!(f.contains("does not divide the 64 attention heads"), "{f}");
    // ← twice: 12 → 8 → 7.
    let left = key(&app, KeyCode::Left);
    app::update(&mut app, left);
    app::update(&mut app, left);
    assert!(frame(&app).contains("◀ 7 ▶"));
    // Tokens field: 1 → 8 multiplies the payload by 8.
    app::update(&mut app, down);
    app::update(&mut app, right);
    let Some(Screen::TpCalc(s)) = app.stack.last() else {
        panic!("calculator not on top")
    };
    assert_eq!(s.tokens, 8);
    assert_eq!(
        s.report.as_ref().expect("report").allreduce_bytes,
        8 * 16384
    );
}

#[test]
fn planner_fields_and_scrolling() {
    let mut app = planner(80, 24);
    let down = key(&app, KeyCode::Down);
    let right = key(&app, KeyCode::Right);
    // nodes 2 → 1: one node, mp needs no --nnodes.
    app::update(&mut app, down);
    app::update(&mut app, Action::Adjust(-1));
    let Some(Screen::Planner(s)) = app.stack.last() else {
        panic!("planner not on top")
    };
    assert_eq!(s.nodes, 1);
    // backend: mp → ray.
    app::update(&mut app, down);
    app::update(&mut app, down);
    app::update(&mut app, right);
    let f = frame(&app);
    assert!(f.contains("◀ ray ▶"), "{f}");
    // PgDn scrolls the plan pane and stops at the end.
    let before = frame(&app);
    let pgdn = key(&app, KeyCode::PageDown);
    app::update(&mut app, pgdn);
    for _ in 0..20 {
        app::update(&mut app, Action::Page(1));
    }
    let after = frame(&app);
    assert_ne!(before, after);
    assert!(
        after.contains("distributed-executor-backend ray"),
        "{after}"
    );
}

#[test]
fn course_map_t_and_p_open_the_screens_and_esc_goes_back() {
    let mut app = app_with(Vec::new(), 80, 24);
    let t = key(&app, KeyCode::Char('t'));
    assert_eq!(t, Action::OpenScreen(ringlab::tui::app::ScreenId::TpCalc));
    app::update(&mut app, t);
    assert!(matches!(app.stack.last(), Some(Screen::TpCalc(_))));
    assert_eq!(app.contexts(), vec![ringlab::tui::screens::tpcalc::OWN]);
    let esc = key(&app, KeyCode::Esc);
    app::update(&mut app, esc);
    assert!(matches!(app.stack.last(), Some(Screen::Home(_))));
    let p = key(&app, KeyCode::Char('p'));
    app::update(&mut app, p);
    assert!(matches!(app.stack.last(), Some(Screen::Planner(_))));
    assert!(frame(&app).contains("vLLM launch planner"));
}

fn lesson_text() -> String {
    let filler: String = (1..=15).map(|i| format!("Paragraph {i}.\n\n")).collect();
    LESSON.replace("FILLER\n", &filler)
}

const LESSON: &str = "+++
id = \"t\"
title = \"T\"
order = 1
prerequisites = []
minutes = 1
objectives = [\"o\"]
+++

Some text.

```tp
model = \"qwen2.5-7b\"
tp = 4
tokens = 128
```

FILLER
```plan
nodes = 3
gpus_per_node = 4
model = \"llama-3.1-8b\"
backend = \"ray\"
```
";

#[test]
fn enter_in_a_lesson_opens_the_first_visible_tp_or_plan_block() {
    let src = SourceFile {
        path: "lessons/t.md".into(),
        text: lesson_text(),
    };
    let mut app = app_with(vec![src], 80, 24);
    app.open_lesson("t").expect("lesson");
    assert!(frame(&app).contains("TP calculator: qwen2.5-7b"));
    app::update(&mut app, Action::Open);
    let Some(Screen::TpCalc(s)) = app.stack.last() else {
        panic!("calculator not opened: {:?}", app.status)
    };
    assert_eq!((s.tp, s.tokens), (4, 128));
    assert_eq!(s.current().map(|m| m.name.as_str()), Some("qwen2.5-7b"));
    app::update(&mut app, Action::Back);
    // Scroll the tp block away: Enter opens the planner below it.
    app::update(&mut app, Action::Bottom);
    assert!(!frame(&app).contains("TP calculator: qwen2.5-7b"));
    app::update(&mut app, Action::Open);
    let Some(Screen::Planner(p)) = app.stack.last() else {
        panic!("planner not opened: {:?}", app.status)
    };
    assert_eq!((p.nodes, p.gpus_per_node, p.backend), (3, 4, Backend::Ray));
}

/// At 80x24 every check the calculator makes is on screen, even at TP 64 where several fail
/// (the link table gives way first), and TP 1 says it has no all-reduce.
#[test]
fn tpcalc_checks_stay_on_screen_at_80x24() {
    for tp in [64, 1, 5] {
        let mut app = app_with(Vec::new(), 80, 24);
        let calc =
            TpCalcState::new("llama-3.1-70b", tp, 1).unwrap_or_else(|e| panic!("tp {tp}: {e}"));
        app.stack.push(calc.into());
        let f = frame(&app);
        let report = ringlab::infer::calculate(&ringlab::infer::TpQuery::new(
            ringlab::infer::find_model("llama-3.1-70b").expect("preset"),
            tp,
            1,
        ))
        .expect("report");
        for c in &report.checks {
            let head: String = c.message.chars().take(30).collect();
            assert!(
                f.contains(&head),
                "tp {tp}: check {head:?} is off screen:\n{f}"
            );
        }
        if tp == 1 {
            assert!(f.contains("none at TP 1"), "{f}");
            assert!(
                f.contains("sent/GPU/pass       0 B  "),
                "no '0 B (0 B)': {f}"
            );
            // A wrapped value stays in the value column.
            assert!(f.contains("│                     whole layers"), "{f}");
        }
        insta::assert_snapshot!(format!("tpcalc_tp{tp}_80x24"), f);
    }
}
