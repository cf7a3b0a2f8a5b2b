//! The vLLM launch planner screen: pick a cluster and a model; read TP and PP with the
//! reasons, the memory check, the communication bill and the commands for every node.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Margin, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::tpcalc::GPN_STEPS;

/// Width of the inputs column: two more than the TP calculator's, for "◀ 400G InfiniBand ▶".
pub const FORM_WIDTH: u16 = super::tpcalc::FORM_WIDTH + 2;
use crate::collective::LINK_PRESETS;
use crate::course::block::PlanBlock;
use crate::infer::plan::MAX_NODES;
use crate::infer::{Backend, ModelConfig, Plan, PlanInput, find_model, plan, presets};
use crate::tui::app::{Action, App, Outcome};
use crate::tui::error::ScreenError;
use crate::tui::form::{Form, FormModel, cycle, step};

/// The course map opens this screen with `p` (its line in `screens!` names this).
pub const OPENER: crate::tui::screens::Opener = crate::tui::screens::Opener::new(
    &[crate::tui::keys::Key::Char('p')],
    "vLLM launch planner",
    Some((5, "planner")),
    |_, _| PlannerState::new("llama-3.1-70b", 2, 8, crate::infer::Backend::Mp).map(Into::into),
);

/// GPU memory sizes (GB) ←/→ step through.
pub const MEM_STEPS: [u64; 8] = [16, 24, 40, 48, 80, 94, 141, 192];
/// Links inside a node (indices into LINK_PRESETS): NVLink, PCIe.
pub const INTRA_LINKS: [usize; 2] = [0, 1];
/// Links between nodes: InfiniBand, Ethernet.
pub const INTER_LINKS: [usize; 2] = [2, 3];

/// The editable fields, top to bottom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanField {
    Model,
    Nodes,
    GpusPerNode,
    Backend,
    GpuMemory,
    Intra,
    Inter,
    /// Typed (Enter): the head node's IP address in the commands.
    HeadIp,
    /// Typed (Enter), or ←/→ through common names: the interface the nodes reach each other on.
    Iface,
}

/// Interface names ←/→ step through on the interface field (Enter types any other).
pub const IFACES: [&str; 5] = ["eth0", "ens5", "enp1s0", "bond0", "ib0"];

pub struct PlannerState {
    pub models: Vec<ModelConfig>,
    pub model: usize,
    pub nodes: usize,
    pub gpus_per_node: usize,
    pub backend: Backend,
    pub gpu_mem_gb: u64,
    pub intra: usize,
    pub inter: usize,
    /// None: `HEAD_IP` stands in the commands.
    pub head_ip: Option<String>,
    pub iface: String,
    pub form: Form,
    /// First row of the plan text shown (PgDn/PgUp).
    pub scroll: u16,
    pub plan: Result<Plan, ScreenError>,
    /// The field being typed (head IP or interface) and its text.
    pub typing: Option<(PlanField, crate::tui::field::Field)>,
}

impl PlannerState {
    pub fn new(
        model: &str,
        nodes: usize,
        gpus_per_node: usize,
        backend: Backend,
    ) -> Result<Self, ScreenError> {
        let m = find_model(model)?;
        let models = presets();
        let idx = models.iter().position(|p| p.name == m.name).unwrap_or(0);
        let mut s = Self {
            models,
            model: idx,
            nodes,
            gpus_per_node,
            backend,
            gpu_mem_gb: 80,
            intra: INTRA_LINKS[0],
            inter: INTER_LINKS[0],
            head_ip: None,
            iface: "eth0".into(),
            form: Form::default(),
            scroll: 0,
            plan: Err(ScreenError::NoPresets),
            typing: None,
        };
        s.recompute();
        s.plan.as_ref().map_err(Clone::clone)?;
        Ok(s)
    }

    /// The planner preset by a ```` ```plan ```` block.
    pub fn from_block(b: &PlanBlock) -> Result<Self, ScreenError> {
        let backend = b.backend.parse::<Backend>().map_err(ScreenError::Backend)?;
        Self::new(&b.model, b.nodes, b.gpus_per_node, backend)
    }

    pub fn current(&self) -> Option<&ModelConfig> {
        self.models.get(self.model)
    }

    fn recompute(&mut self) {
        self.plan = match self.current() {
            Some(m) => {
                let mut input = PlanInput::new(m.clone(), self.nodes, self.gpus_per_node);
                input.gpu_mem_gb = self.gpu_mem_gb as f64;
                input.intra = self.intra;
                input.inter = self.inter;
                input.head_ip = self.head_ip.clone();
                input.iface = self.iface.clone();
                plan(&input).map_err(ScreenError::from)
            }
            None => Err(ScreenError::NoPresets),
        };
    }

    /// The plan text for a pane `width` columns wide.
    pub fn text(&self, width: u16) -> Vec<String> {
        match &self.plan {
            Ok(p) => p
                .text_for_width(Some(self.backend), width as usize)
                .lines()
                .flat_map(|l| wrap_line(l, width as usize))
                .collect(),
            Err(e) => vec![e.to_string()],
        }
    }
}

/// A link preset's name, as the plan text and the ring view write it.
fn short_link(i: usize) -> &'static str {
    LINK_PRESETS.get(i).map_or("?", |l| l.name)
}

/// Wraps one line of the plan at spaces to `width`, keeping its indentation (plus two columns
/// on continuation lines).
fn wrap_line(l: &str, width: usize) -> Vec<String> {
    if l.chars().count() <= width || width < 10 {
        return vec![l.to_string()];
    }
    let indent: String = l.chars().take_while(|&c| c == ' ').collect();
    let rest = format!("{indent}  ");
    crate::infer::wrap(l.trim_start(), width, &indent, &rest)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The plan pane for a body area: right of the inputs, one column of margin.
fn plan_area(body: Rect) -> Rect {
    let [_, right] =
        Layout::horizontal([Constraint::Length(FORM_WIDTH), Constraint::Min(20)]).areas(body);
    right.inner(Margin::new(1, 0))
}

/// Screen area below the two header lines, as render lays it out.
fn body_area(area: Rect) -> Rect {
    let [_, body] = Layout::vertical([Constraint::Length(2), Constraint::Min(1)]).areas(area);
    body
}

impl FormModel for PlannerState {
    type Field = PlanField;
    const FIELDS: &'static [PlanField] = &[
        PlanField::Model,
        PlanField::Nodes,
        PlanField::GpusPerNode,
        PlanField::Backend,
        PlanField::GpuMemory,
        PlanField::Intra,
        PlanField::Inter,
        PlanField::HeadIp,
        PlanField::Iface,
    ];

    fn label(f: PlanField) -> &'static str {
        match f {
            PlanField::Model => "model",
            PlanField::Nodes => "nodes",
            PlanField::GpusPerNode => "GPUs/node",
            PlanField::Backend => "backend",
            PlanField::GpuMemory => "GPU memory",
            PlanField::Intra => "intra-node",
            PlanField::Inter => "inter-node",
            PlanField::HeadIp => "head IP",
            PlanField::Iface => "interface",
        }
    }

    fn value(&self, f: PlanField) -> String {
        match f {
            PlanField::Model => self.current().map_or("?".into(), |m| m.name.clone()),
            PlanField::Nodes => self.nodes.to_string(),
            PlanField::GpusPerNode => self.gpus_per_node.to_string(),
            PlanField::Backend => self.backend.to_string(),
            PlanField::GpuMemory => format!("{} GB", self.gpu_mem_gb),
            PlanField::Intra => short_link(self.intra).to_string(),
            PlanField::Inter => short_link(self.inter).to_string(),
            PlanField::HeadIp => self.head_ip.clone().unwrap_or_else(|| "HEAD_IP".into()),
            PlanField::Iface => self.iface.clone(),
        }
    }

    fn adjust(&mut self, f: PlanField, d: i32) {
        let toggle = |list: &[usize], cur: usize| {
            let i = list.iter().position(|&x| x == cur).unwrap_or(0);
            list[(i + 1) % list.len()]
        };
        match f {
            PlanField::Model => self.model = cycle(self.model, self.models.len(), d),
            PlanField::Nodes => {
                self.nodes = self
                    .nodes
                    .saturating_add_signed(d as isize)
                    .clamp(1, MAX_NODES)
            }
            PlanField::GpusPerNode => self.gpus_per_node = step(&GPN_STEPS, self.gpus_per_node, d),
            PlanField::Backend => self.backend = self.backend.next(),
            PlanField::GpuMemory => self.gpu_mem_gb = step(&MEM_STEPS, self.gpu_mem_gb, d),
            PlanField::Intra => self.intra = toggle(&INTRA_LINKS, self.intra),
            PlanField::Inter => self.inter = toggle(&INTER_LINKS, self.inter),
            // An address is typed (Enter); ←/→ leave it.
            PlanField::HeadIp => {}
            PlanField::Iface => {
                let i = IFACES.iter().position(|&x| x == self.iface);
                let next = match i {
                    Some(i) => cycle(i, IFACES.len(), d),
                    None => 0,
                };
                self.iface = IFACES[next].to_string();
            }
        }
        self.scroll = 0;
    }

    fn typed(f: PlanField) -> bool {
        f == PlanField::HeadIp
    }

    type Error = ScreenError;

    fn validate(&mut self) -> Result<(), ScreenError> {
        self.recompute();
        self.plan.as_ref().map(|_| ()).map_err(Clone::clone)
    }
}

impl PlannerState {
    /// Set a typed field; a value the plan refuses is not kept (the error says why).
    fn set_typed(&mut self, field: PlanField, text: &str) -> Result<(), ScreenError> {
        let text = text.trim();
        let (old_ip, old_iface) = (self.head_ip.clone(), self.iface.clone());
        match field {
            PlanField::HeadIp => {
                self.head_ip = (!text.is_empty() && text != "HEAD_IP").then(|| text.to_string())
            }
            PlanField::Iface if text.is_empty() => return Err(ScreenError::NoInterface),
            PlanField::Iface => self.iface = text.to_string(),
            _ => return Ok(()),
        }
        self.scroll = 0;
        if let Err(e) = self.validate() {
            self.head_ip = old_ip;
            self.iface = old_iface;
            self.recompute();
            // The plan speaks in `ringlab plan`'s flags; here the fields have names.
            return Err(match e {
                ScreenError::Plan(e) => ScreenError::TypedField(e),
                e => e,
            });
        }
        Ok(())
    }

    /// The launch commands, plain: to the clipboard (OSC 52) and to a file in `dir` that no
    /// earlier copy is overwritten by. Returns what the status line says.
    pub fn copy_commands(&self, app: &mut App, dir: &std::path::Path) -> String {
        let plan = self.plan.as_ref().ok();
        if plan.is_some_and(|p| !p.valid || p.memory.fits == Some(false)) {
            return "no launch commands: this plan cannot run (see ✗)".into();
        }
        let (Some(text), Some(script)) = (
            plan.and_then(|p| p.commands_text(self.backend)),
            plan.and_then(|p| p.script_text(self.backend)),
        ) else {
            return "no plan to copy: fix the fields first".into();
        };
        let base = format!(
            "vllm-launch-{}-{}x{}",
            self.current().map_or("model", |m| m.name.as_str()),
            self.nodes,
            self.gpus_per_node
        );
        let lines = text.lines().count();
        app.clipboard = Some(text.clone());
        let written = (1..100).find_map(|i| {
            let name = if i == 1 {
                format!("{base}.sh")
            } else {
                format!("{base}-{i}.sh")
            };
            let path = dir.join(name);
            // Private and renamed into place, never over anything already there: a file or a
            // link at a name means the next number.
            // The file is a script that runs one step per node (`sh FILE STEP`); the
            // clipboard has the plain commands, to paste on each node.
            match crate::files::write_private_replace(
                &path,
                script.as_bytes(),
                crate::files::FILE_MODE,
                false,
            ) {
                Ok(()) => Some(Ok(path)),
                Err(crate::files::WriteError::Exists(_) | crate::files::WriteError::Link(_)) => {
                    None
                }
                Err(crate::files::WriteError::Failed { path, error }) => {
                    Some(Err(format!("{}: {error}", path.display())))
                }
            }
        });
        match written {
            // The file's name, not its folder (it is the current one): the name must fit 80
            // columns.
            Some(Ok(path)) => format!(
                "{lines} lines copied (OSC 52) and written to ./{}",
                path.file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
            ),
            Some(Err(e)) => format!("{lines} lines copied (OSC 52); the file was not written: {e}"),
            None => format!("{lines} lines copied (OSC 52); {base}.sh … -99.sh all exist"),
        }
    }
}

pub const OWN: crate::tui::keys::Context = crate::tui::keys::Context::Own("Launch planner");

/// The planner's own verbs (`Action::Screen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::FromRepr)]
#[repr(u8)]
pub enum Verb {
    /// Copy the launch commands, plain (the terminal's clipboard and a file here).
    Copy,
}

impl Verb {
    pub const fn act(self) -> Action {
        Action::Screen(crate::tui::app::ScreenId::Planner, self as u8, 0)
    }
}

use crate::tui::keys::{Binding, DOWN, Key, NEXT_VALUE, PAGE_DOWN, PAGE_UP, PREV_VALUE, UP, bind};

#[rustfmt::skip]
pub const KEYS: &[Binding] = &[
    bind(OWN, DOWN, "choose field", Action::Move(1), Some((1, "choose field"))),
    bind(OWN, UP, "previous field", Action::Move(-1), None),
    bind(OWN, NEXT_VALUE, "change value", Action::Adjust(1), Some((1, "change value"))),
    bind(OWN, PREV_VALUE, "previous value", Action::Adjust(-1), None),
    bind(OWN, PAGE_DOWN, "scroll plan", Action::Page(1), Some((1, "scroll plan"))),
    bind(OWN, PAGE_UP, "scroll up", Action::Page(-1), None),
    bind(OWN, &[Key::Code(crossterm::event::KeyCode::Enter)], "type the head IP or interface (on its field)", Action::Open, None),
    bind(OWN, &[Key::Char('y')], "copy the launch commands, plain (clipboard and a file here)", Verb::Copy.act(), Some((2, "copy commands"))),
];

pub fn update(s: &mut PlannerState, app: &mut App, action: Action) -> Outcome {
    if let Some((field, text)) = &mut s.typing {
        match action {
            Action::Edit(r) => text.apply(r),
            Action::InputCancel => s.typing = None,
            Action::InputSubmit => {
                let (field, value) = (*field, text.value().to_string());
                match s.set_typed(field, &value) {
                    Ok(()) => s.typing = None,
                    Err(e) => app.status = Some(e.to_string()),
                }
            }
            _ => {}
        }
        return Outcome::Stay;
    }
    if let Some((Verb::Copy, _)) = action.verb(crate::tui::app::ScreenId::Planner, Verb::from_repr)
    {
        let dir = std::env::current_dir().unwrap_or_else(|_| std::env::temp_dir());
        app.status = Some(s.copy_commands(app, &dir));
        return Outcome::Stay;
    }
    match action {
        Action::Move(_) | Action::Adjust(_) => {
            let mut form = s.form;
            if let Some(e) = form.update(s, action) {
                app.status = Some(e);
            }
            s.form = form;
        }
        Action::Page(d) => {
            let pane = plan_pane(s, &app.theme, plan_area(body_area(app.body_area())));
            s.scroll = pane.page(s.scroll, d);
        }
        Action::Open => match s.form.focused::<PlannerState>() {
            Some(f @ (PlanField::HeadIp | PlanField::Iface)) => {
                let mut field = crate::tui::field::Field::default();
                let now = match f {
                    PlanField::HeadIp => s.head_ip.clone().unwrap_or_default(),
                    _ => s.iface.clone(),
                };
                field.set(&now);
                s.typing = Some((f, field));
            }
            _ => app.status = Some("Enter types the head IP or the interface: j to them".into()),
        },
        Action::Back => return Outcome::Pop,
        _ => {}
    }
    Outcome::Stay
}

pub fn render(s: &PlannerState, app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let [head, _] = Layout::vertical([Constraint::Length(2), Constraint::Min(1)]).areas(area);
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(" vLLM launch planner ", t.title),
            Span::styled("— TP = GPUs per node, PP = nodes, and when not to", t.dim),
        ])),
        head,
    );
    let body = body_area(area);
    let [left, _] =
        Layout::horizontal([Constraint::Length(FORM_WIDTH), Constraint::Min(20)]).areas(body);
    let mut lines = s.form.lines(s, t);
    if let Some((f, text)) = &s.typing {
        // The field being typed, under the column: Enter sets it, Esc keeps the old value.
        let label = PlannerState::label(*f);
        let mut spans = vec![Span::styled(format!("{label}> "), t.strong)];
        spans.extend(text.spans(t.strong, t.accent));
        lines.push(Line::from(spans));
        lines.push(Line::styled("Enter sets · Esc keeps", t.dim));
    }
    lines.push(Line::raw(""));
    match &s.plan {
        Ok(p) => {
            lines.push(Line::styled(
                format!(
                    "TP {} × PP {} = {}",
                    p.tp,
                    p.pp,
                    crate::units::count(p.gpus_used, "GPU")
                ),
                t.h3,
            ));
            let (text, style) = match p.memory.fits {
                Some(true) => ("weights fit", t.ok),
                Some(false) => ("✗ weights won't fit", t.error),
                None => ("memory not checked", t.dim),
            };
            lines.push(Line::styled(text, style));
            if !p.valid {
                lines.push(Line::styled("✗ this plan cannot run", t.error));
            }
        }
        Err(e) => lines.push(Line::styled(e.to_string(), t.error)),
    }
    frame.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::RIGHT)
                .border_style(t.border)
                .title(Span::styled(" Cluster ", t.h2)),
        ),
        left,
    );
    plan_pane(s, t, plan_area(body)).render(s.scroll, "plan", t, frame);
}

/// The plan's text laid out in `area` (it scrolls with PgDn/PgUp by the pane's height).
fn plan_pane(
    s: &PlannerState,
    t: &crate::tui::theme::Theme,
    area: Rect,
) -> crate::tui::scroll::Pane {
    let lines = s
        .text(area.width)
        .into_iter()
        .map(|l| styled_line(l, t))
        .collect();
    crate::tui::scroll::Pane::new(lines, area)
}

/// Headings, checks and commands get their own styles.
fn styled_line(l: String, t: &crate::tui::theme::Theme) -> Line<'static> {
    let trimmed = l.trim_start();
    let style = if trimmed.starts_with('✗') {
        t.error
    } else if trimmed.starts_with("! ") {
        t.warn
    } else if trimmed.starts_with('#') {
        t.dim
    } else if !l.starts_with(' ') && l.ends_with(':') {
        t.h3
    } else if trimmed.starts_with("export ")
        || trimmed.starts_with("vllm ")
        || trimmed.starts_with("ray ")
        || trimmed.starts_with("--")
    {
        t.code
    } else {
        t.base
    };
    Line::styled(l, style)
}

impl crate::tui::screens::View for PlannerState {
    fn update(&mut self, app: &mut App, action: Action) -> Outcome {
        update(self, app, action)
    }

    fn render(&self, app: &App, frame: &mut ratatui::Frame, area: ratatui::layout::Rect) {
        render(self, app, frame, area)
    }

    fn contexts(&self) -> Vec<crate::tui::keys::Context> {
        vec![OWN]
    }

    fn takes_text(&self) -> bool {
        self.typing.is_some()
    }

    fn hint_line(&self, app: &App) -> Option<Line<'static>> {
        self.typing
            .is_some()
            .then(|| super::typing_hint(app, "sets it"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::field::InputRequest;

    fn app() -> App {
        App::new(
            crate::course::Course::embedded(),
            crate::tui::theme::Theme::color(),
        )
    }

    fn type_into(s: &mut PlannerState, app: &mut App, field: PlanField, text: &str) {
        s.form.focus = PlannerState::FIELDS
            .iter()
            .position(|&f| f == field)
            .expect("field");
        update(s, app, Action::Open);
        assert!(s.typing.is_some(), "Enter opens the field");
        update(s, app, Action::Edit(InputRequest::DeleteLine));
        for c in text.chars() {
            update(s, app, Action::Edit(InputRequest::InsertChar(c)));
        }
        update(s, app, Action::InputSubmit);
    }

    /// The head IP and the interface reach every command; a value the plan refuses is not
    /// kept, the error says why and the text stays to mend.
    #[test]
    fn typed_head_ip_and_interface_reach_the_commands() {
        let mut app = app();
        let mut s = PlannerState::new("llama-3.1-70b", 2, 8, Backend::Mp).expect("plan");
        // The typed field is drawn as one: ⏎, not the ◀ ▶ that ←/→ would move.
        s.form.focus = PlannerState::FIELDS
            .iter()
            .position(|&f| f == PlanField::HeadIp)
            .expect("field");
        let drawn: Vec<String> = s
            .form
            .lines(&s, &app.theme)
            .iter()
            .map(|l| l.spans.iter().map(|x| x.content.as_ref()).collect())
            .collect();
        let row = drawn.iter().find(|r| r.contains("head IP")).expect("row");
        assert!(row.ends_with("HEAD_IP ⏎") && !row.contains('◀'), "{row}");
        type_into(&mut s, &mut app, PlanField::HeadIp, "10.1.2.3");
        assert!(s.typing.is_none());
        type_into(&mut s, &mut app, PlanField::Iface, "ens5");
        let text = s
            .plan
            .as_ref()
            .expect("plan")
            .commands_text(Backend::Mp)
            .expect("mp");
        assert!(text.contains("--master-addr 10.1.2.3"), "{text}");
        assert!(text.contains("export NCCL_SOCKET_IFNAME=ens5"), "{text}");
        assert!(!text.contains("HEAD_IP"), "{text}");
        type_into(&mut s, &mut app, PlanField::HeadIp, "10.1.2");
        assert_eq!(
            s.head_ip.as_deref(),
            Some("10.1.2.3"),
            "the old address is kept"
        );
        assert!(s.typing.is_some(), "the text stays to mend");
        assert!(
            app.status
                .as_deref()
                .is_some_and(|e| e.starts_with("head IP \"10.1.2\"")),
            "{:?}",
            app.status
        );
        update(&mut s, &mut app, Action::InputCancel);
        type_into(&mut s, &mut app, PlanField::Iface, "eth0 eth1");
        assert_eq!(s.iface, "ens5");
        update(&mut s, &mut app, Action::InputCancel);
        // ←/→ step through common names.
        update(&mut s, &mut app, Action::Adjust(1));
        assert_eq!(s.iface, IFACES[2]);
        // An empty head IP puts the placeholder back.
        type_into(&mut s, &mut app, PlanField::HeadIp, "");
        assert_eq!(s.head_ip, None);
    }

    /// `y` puts the commands, without the screen's border or indent, on the clipboard, and a
    /// script that runs one step per node in a file; a second copy never overwrites the first.
    #[test]
    fn copy_writes_plain_commands_and_never_overwrites() {
        let mut app = app();
        let s = PlannerState::new("llama-3.1-70b", 2, 8, Backend::Mp).expect("plan");
        let dir = tempfile::tempdir().expect("tempdir");
        let said = s.copy_commands(&mut app, dir.path());
        let first = dir.path().join("vllm-launch-llama-3.1-70b-2x8.sh");
        assert!(
            said.ends_with("written to ./vllm-launch-llama-3.1-70b-2x8.sh"),
            "{said}"
        );
        assert!(
            said.chars().count() <= 78,
            "fits the bar at 80 columns: {said}"
        );
        let script = std::fs::read_to_string(&first).expect("written");
        let text = app.clipboard.clone().expect("copied");
        assert!(
            text.starts_with("# node 0 (head)\nexport NCCL_SOCKET_IFNAME=eth0\n"),
            "{text}"
        );
        // The file is a script: which step runs where, and run as it is it starts nothing.
        assert!(script.starts_with("#!/bin/sh\n"), "{script}");
        assert!(script.contains("#   step 1: on node 0 (head)"), "{script}");
        assert!(
            script.contains("#   step 2: on node 1 (worker)"),
            "{script}"
        );
        let run = |args: &[&str]| {
            std::process::Command::new("sh")
                .arg(&first)
                .args(args)
                .output()
                .expect("sh")
        };
        let bare = run(&[]);
        assert!(!bare.status.success(), "{bare:?}");
        assert!(
            String::from_utf8_lossy(&bare.stderr).contains("usage"),
            "{bare:?}"
        );
        let wrong = run(&["9"]);
        assert_eq!(wrong.status.code(), Some(2), "{wrong:?}");
        assert!(String::from_utf8_lossy(&wrong.stderr).contains("no step 9"));
        // Commands wrap at 80 columns; an export (the worker's address expression) stays whole.
        assert!(
            text.lines()
                .all(|l| !l.contains('│') && (l.starts_with("export ") || l.chars().count() <= 80)),
            "{text}"
        );
        assert!(
            said.starts_with(&format!("{} lines copied", text.lines().count())),
            "{said}"
        );
        std::fs::write(&first, "mine").expect("edit");
        let said = s.copy_commands(&mut app, dir.path());
        assert!(said.contains("2x8-2.sh"), "{said}");
        assert_eq!(std::fs::read_to_string(&first).expect("kept"), "mine");
    }
}
