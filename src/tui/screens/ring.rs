//! The ring view: a collective played step by step from its schedule. A step is data, so
//! stepping back is exact: the state after k steps is a replay of steps 0..k.

use crate::collective::{
    Algorithm, Collective, Contributions, Dtype, Estimate, LINK_PRESETS, Schedule, Spec, Topology,
    Traffic, estimate_on, sent_through, traffic,
};
use crate::course::block::RingBlock;
use crate::tui::app::{Action, App, Outcome};
use crate::tui::error::ScreenError;
use crate::tui::keys::{BOTTOM, Binding, Context, Key, TOP, bind};
use crate::units::{count, format_bytes};
use Key::{Char, Code};
use crossterm::event::KeyCode;

/// The course map opens this screen with `r` (its line in `screens!` names this).
pub const OPENER: crate::tui::screens::Opener = crate::tui::screens::Opener::new(
    &[crate::tui::keys::Key::Char('r')],
    "ring all-reduce view",
    Some((3, "ring view")),
    |_, _| RingState::new(RingParams::default()).map(Into::into),
);

/// Animation speeds (milliseconds per step), slowest first.
pub const SPEEDS_MS: [u64; 6] = [2000, 1200, 700, 400, 200, 80];
/// Message sizes the `m` key cycles through.
pub const SIZES: [u64; 6] = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30];
/// The ring and the buffer grid are drawn up to this many ranks; numbers work up to MAX_RANKS.
pub const MAX_DRAWN: usize = 16;
pub const MAX_RANKS: usize = crate::course::block::MAX_RING_RANKS;

/// What to show: a collective, an algorithm, N ranks and a message of `bytes` of `dtype`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingParams {
    pub coll: Collective,
    pub algo: Algorithm,
    pub ranks: usize,
    pub bytes: u64,
    pub dtype: Dtype,
    /// Root of broadcast/reduce (and the hub of naive, the top of tree).
    pub root: usize,
    /// GPUs per node for the two-level all-reduce and the nodes link choice; 0 = the
    /// default shape ([`crate::collective::default_gpus_per_node`]).
    pub gpus_per_node: usize,
}

impl Default for RingParams {
    fn default() -> Self {
        Self {
            coll: Collective::AllReduce,
            algo: Algorithm::Ring,
            ranks: 4,
            bytes: 1 << 20,
            dtype: Dtype::F32,
            root: 0,
            gpus_per_node: 0,
        }
    }
}

impl RingParams {
    /// Parameters of a ```` ```ring ```` block in a lesson.
    pub fn from_block(b: &RingBlock) -> Result<Self, ScreenError> {
        let s = b.resolve().map_err(ScreenError::block("ring"))?;
        let p = Self {
            coll: s.op,
            algo: s.algo,
            ranks: s.ranks,
            bytes: s.bytes,
            dtype: s.dtype,
            root: 0,
            gpus_per_node: 0,
        };
        // `resolve` has checked what `validate` would.
        Ok(p)
    }

    pub fn validate(&self) -> Result<(), ScreenError> {
        if !(1..=MAX_RANKS).contains(&self.ranks) {
            return Err(ScreenError::Ranks {
                got: self.ranks,
                max: MAX_RANKS,
            });
        }
        Ok(Schedule::check(&self.spec()?)?)
    }

    /// Whole elements of the message (a partial element is dropped).
    pub fn count(&self) -> usize {
        (self.bytes / self.dtype.size() as u64) as usize
    }

    /// What [`count`](Self::count) dropped, said after the size as typed: "is not a whole
    /// number of f32 elements (4 B each): using 1000 B (250 elements)"; None when nothing was.
    pub fn rounding_note(&self) -> Option<String> {
        let size = self.dtype.size() as u64;
        (!self.bytes.is_multiple_of(size)).then(|| {
            format!(
                "is not a whole number of {} elements ({size} B each): using {} B ({} elements)",
                self.dtype,
                self.count() as u64 * size,
                self.count()
            )
        })
    }

    pub fn spec(&self) -> Result<Spec, ScreenError> {
        if self.gpus_per_node > 0 && !self.ranks.is_multiple_of(self.gpus_per_node) {
            return Err(ScreenError::NodeSize {
                gpus_per_node: self.gpus_per_node,
                ranks: self.ranks,
            });
        }
        Ok(Spec {
            root: self.root,
            gpus_per_node: self.gpus_per_node,
            ..Spec::new(
                self.coll,
                self.algo,
                self.ranks,
                self.count(),
                self.dtype.size(),
            )
        })
    }
}

/// One row of the side-by-side comparison: the same N and M under another algorithm.
#[derive(Debug, Clone, PartialEq)]
pub struct Compare {
    pub algo: Algorithm,
    pub steps: usize,
    /// Most bytes any one rank sends.
    pub max_sent: u64,
    /// Most bytes any one rank receives.
    pub max_received: u64,
    /// The rank whose port (NIC or NVLink port) carries the most, and what it carries
    /// (sent + received).
    pub busiest_port: Option<crate::collective::RankBytes>,
    /// Every rank's port carries the same (ring): no rank is the busiest.
    pub ports_even: bool,
    /// The time estimate on each link choice ([`LINK_CHOICES`]), so that `L` rebuilds nothing.
    pub estimates: Vec<Estimate>,
}

impl Compare {
    /// The estimate on link choice `link`.
    pub fn estimate(&self, link: usize) -> Option<&Estimate> {
        self.estimates.get(link)
    }
}

pub struct RingState {
    pub params: RingParams,
    pub schedule: Schedule,
    pub traffic: Traffic,
    pub compare: Vec<Compare>,
    /// Steps applied so far (0 = before the first transfer, len = done).
    pub step: usize,
    /// Who holds whose data after `step` steps (None when N is too large to draw).
    pub contrib: Option<Contributions>,
    /// Bytes each rank has sent after `step` steps.
    pub sent: Vec<u64>,
    pub playing: bool,
    pub speed: usize,
    /// What the time estimates assume: an index into LINK_PRESETS (every rank on that link),
    /// or LINK_PRESETS.len() for nodes (NVLink 4 inside, one 400G IB NIC per GPU between).
    pub link: usize,
    /// Presenter mode: a caption for every step, generated from the schedule.
    pub narrate: bool,
    /// The caption of the step just applied (empty unless `narrate`).
    pub caption: String,
    /// `M`: a message size being typed ("3 MiB", "1000000", "512 MB").
    pub typing: Option<crate::tui::field::Field>,
}

/// How many link choices `L` cycles through: every preset, then the two-level topology.
pub const LINK_CHOICES: usize = LINK_PRESETS.len() + 1;

/// The topology link choice `link` means for `spec` (see [`RingState::link`]).
pub fn topology(spec: &Spec, link: usize) -> Topology {
    match LINK_PRESETS.get(link) {
        Some(l) => Topology::flat(*l),
        None => Topology::nvlink_ib(spec.node_size()),
    }
}

/// What the estimates assume, in words: "NVLink 4: 450 GB/s, 2 µs/step" or, for nodes,
/// "2 nodes × 4 GPUs" (the note under the table names the links).
pub fn topology_label(spec: &Spec, link: usize) -> String {
    let t = topology(spec, link);
    if t.gpus_per_node == 0 {
        format!(
            "{}: {} GB/s, {} µs/step",
            t.intra.name, t.intra.bandwidth_gbps, t.intra.latency_us
        )
    } else {
        format!("{} nodes × {} GPUs", spec.nodes(), t.gpus_per_node)
    }
}

impl RingState {
    pub fn new(params: RingParams) -> Result<Self, ScreenError> {
        let spec = params.spec()?;
        let schedule = Schedule::build(&spec)?;
        let mut s = Self {
            params,
            traffic: traffic(&schedule),
            schedule,
            compare: Vec::new(),
            step: 0,
            contrib: None,
            sent: Vec::new(),
            playing: false,
            speed: 2,
            link: 0,
            narrate: false,
            caption: String::new(),
            typing: None,
        };
        s.compare = compare(&spec);
        s.seek(0);
        Ok(s)
    }

    /// Rebuild for new parameters, keeping speed and link; the step restarts at 0.
    fn rebuild(&mut self, params: RingParams, app: &mut App) {
        match Self::new(params) {
            Ok(mut next) => {
                next.speed = self.speed;
                next.link = self.link;
                next.playing = self.playing;
                next.narrate = self.narrate;
                next.seek(0);
                *self = next;
                if let Some(note) = self.node_note() {
                    app.status = Some(note);
                }
            }
            Err(e) => app.status = Some(e.to_string()),
        }
    }

    /// What the view chose for the node shape when the learner did not (two-level only):
    /// see [`crate::collective::node_shape_note`].
    pub fn node_note(&self) -> Option<String> {
        (self.params.gpus_per_node == 0 && self.params.algo == Algorithm::TwoLevel)
            .then(|| crate::collective::node_shape_note(self.params.ranks))
            .flatten()
    }

    /// Jump to the state after `step` steps (clamped), recomputing it from the schedule.
    pub fn seek(&mut self, step: usize) {
        self.step = step.min(self.schedule.len());
        self.sent = sent_through(&self.schedule, self.step);
        self.contrib = (self.params.ranks <= MAX_DRAWN)
            .then(|| Contributions::after(&self.schedule, self.step).ok())
            .flatten();
        if self.narrate {
            self.caption = match self.step.checked_sub(1) {
                Some(k) => crate::course::narrate::caption(&self.schedule, k).unwrap_or_default(),
                // The header already says what comes first and whether it plays.
                None => "Space plays or pauses · → steps · ← steps back".to_string(),
            };
        }
    }

    /// This view with a caption for every step (presenter mode).
    pub fn narrated(mut self) -> Self {
        self.narrate = true;
        self.seek(self.step);
        self
    }

    pub fn at_end(&self) -> bool {
        self.step >= self.schedule.len()
    }

    pub fn tick_ms(&self) -> u64 {
        SPEEDS_MS[self.speed.min(SPEEDS_MS.len() - 1)]
    }

    /// "reduce-scatter s = 1 (step 2 of 3)" for the step just applied, or what comes first.
    pub fn phase_text(&self) -> String {
        let n = self.schedule.len();
        if n == 0 {
            return "nothing to move: with one rank (or an empty buffer) there are no steps".into();
        }
        if self.step == 0 {
            return match self.schedule.phase_position(0) {
                // One phase (broadcast, all-to-all, …): nothing else comes after it.
                Some((p, _, k)) if k == n => format!("ready: {p}, {}", count(k, "step")),
                Some((p, _, k)) => format!("ready: {p} comes first ({})", count(k, "step")),
                None => String::new(),
            };
        }
        match self.schedule.phase_position(self.step - 1) {
            // s counts from 0 within the phase, as lesson 02's rules do; "i of k" from 1.
            Some((p, i, k)) => format!(
                "{p} s = {} (step {i} of {k})  ·  step {} of {n} overall",
                i - 1,
                self.step
            ),
            None => String::new(),
        }
    }

    pub fn title(&self) -> String {
        self.title_within(usize::MAX)
    }

    /// The title in at most `width` columns where it can be: the algorithm's gloss goes first,
    /// then the element count ("all-reduce · two-level · N = 4 · M = 1 MiB").
    pub fn title_within(&self, width: usize) -> String {
        let p = &self.params;
        // Two-level's shape, as its schedule builds it: nodes × GPUs.
        let shape = {
            let g = match p.gpus_per_node {
                0 => crate::collective::default_gpus_per_node(p.ranks),
                g => g,
            }
            .max(1);
            format!("{} nodes × {g} GPUs", p.ranks / g)
        };
        // All-to-all and send/recv have one schedule whatever the algorithm: no label for it.
        let gloss = match p.algo {
            _ if p.coll.is_point_to_point() => "point-to-point".to_string(),
            Algorithm::TwoLevel => {
                format!("two-level, {shape} (hierarchical, not an NCCL algorithm)")
            }
            Algorithm::RecursiveDoubling => {
                "recursive-doubling (MPI's short-message all-reduce)".to_string()
            }
            a => a.name().to_string(),
        };
        let bare = if p.coll.is_point_to_point() {
            gloss.clone()
        } else if p.algo == Algorithm::TwoLevel {
            format!("two-level, {shape}")
        } else {
            p.algo.name().to_string()
        };
        let size = format_bytes(p.count() as u64 * p.dtype.size() as u64);
        let elems = format!(" ({} × {})", p.count(), p.dtype.name());
        // The operation as the phases and lessons write it ("send/recv", not the CLI's
        // "sendrecv").
        let op = match p.coll {
            Collective::SendRecv => "send/recv",
            op => op.name(),
        };
        let head = |algo: &str| format!("{op} · {algo} · N = {} · M = {size}", p.ranks);
        [
            format!("{}{elems}", head(&gloss)),
            format!("{}{elems}", head(&bare)),
            head(&bare),
        ]
        .into_iter()
        .find(|t| t.chars().count() <= width)
        .unwrap_or_else(|| head(&bare))
    }
}

/// The speed whose step time is nearest `pace_ms`.
pub fn speed_for(pace_ms: u64) -> usize {
    (0..SPEEDS_MS.len())
        .min_by_key(|&i| SPEEDS_MS[i].abs_diff(pace_ms))
        .unwrap_or(0)
}

/// Every algorithm that has a schedule for this collective, on the same N and M, with its time
/// on every link choice (each schedule is built once).
pub fn compare(spec: &Spec) -> Vec<Compare> {
    Algorithm::ALL
        .iter()
        .filter(|a| a.supports(spec.coll))
        .filter(|&&a| !spec.coll.is_point_to_point() || a == spec.algo)
        .filter_map(|&algo| {
            let s = Schedule::build(&Spec { algo, ..*spec }).ok()?;
            let t = traffic(&s);
            Some(Compare {
                algo,
                steps: t.steps,
                max_sent: t.max_sent(),
                max_received: t.max_received(),
                busiest_port: t.busiest_port(),
                ports_even: t
                    .per_rank
                    .windows(2)
                    .all(|w| w[0].port_bytes() == w[1].port_bytes()),
                estimates: (0..LINK_CHOICES)
                    .map(|link| estimate_on(&s, &topology(spec, link)))
                    .collect(),
            })
        })
        .collect()
}

/// A typed message size: any size `--bytes` takes, at least one element, at most the largest
/// size `m` cycles through (the view holds a buffer per rank).
pub fn typed_size(text: &str, elem: usize) -> Result<u64, ScreenError> {
    let max = SIZES[SIZES.len() - 1];
    let bytes = crate::units::parse_size(text.trim()).map_err(ScreenError::Size)?;
    if bytes < elem as u64 {
        return Err(ScreenError::BelowElement { bytes, elem });
    }
    if bytes > max {
        return Err(ScreenError::AboveView { bytes, max });
    }
    Ok(bytes)
}

fn next_ranks(n: usize, up: bool) -> usize {
    match (up, n) {
        (true, n) if n < MAX_DRAWN => n + 1,
        (true, n) => (n * 2).min(MAX_RANKS),
        (false, n) if n > MAX_DRAWN => (n / 2).max(MAX_DRAWN),
        (false, n) => n.saturating_sub(1).max(2),
    }
}

const OWN: Context = Context::Own("Ring view");

/// The ring view's own verbs (`Action::Screen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::FromRepr)]
#[repr(u8)]
pub enum Verb {
    PlayPause,
    /// A step forward (+1) or back (-1).
    Step,
    /// More (+1) or fewer (-1) ranks.
    Ranks,
    /// Faster (+1) or slower (-1).
    Speed,
    /// The next algorithm with a schedule for this collective.
    Algo,
    /// The next collective.
    Coll,
    /// The next message size.
    Size,
    /// The next link the time estimates assume.
    Link,
    /// Start typing a message size.
    TypeSize,
}

impl Verb {
    /// The action, with an amount (+1/−1 for verbs that go both ways).
    pub const fn by(self, d: i32) -> Action {
        Action::Screen(crate::tui::app::ScreenId::Ring, self as u8, d)
    }

    pub const fn act(self) -> Action {
        self.by(0)
    }
}

#[rustfmt::skip]
pub const KEYS: &[Binding] = &[
    bind(OWN, &[Char(' ')], "play / pause", Verb::PlayPause.act(), Some((1, "play/pause"))),
    bind(OWN, &[Code(KeyCode::Right), Char('l')], "step forward", Verb::Step.by(1), Some((1, "step"))),
    bind(OWN, &[Code(KeyCode::Left), Char('h')], "step back", Verb::Step.by(-1), Some((1, "back"))),
    bind(OWN, &[Code(KeyCode::PageDown)], "step forward (presentation clicker)", Verb::Step.by(1), None),
    bind(OWN, &[Code(KeyCode::PageUp)], "step back (presentation clicker)", Verb::Step.by(-1), None),
    bind(OWN, TOP, "first step", Action::Top, None),
    bind(OWN, BOTTOM, "last step", Action::Bottom, None),
    bind(OWN, &[Char('+'), Char('=')], "more ranks", Verb::Ranks.by(1), Some((2, "ranks"))),
    bind(OWN, &[Char('-'), Char('_')], "fewer ranks", Verb::Ranks.by(-1), None),
    bind(OWN, &[Char(']')], "faster", Verb::Speed.by(1), Some((4, "faster"))),
    bind(OWN, &[Char('[')], "slower", Verb::Speed.by(-1), Some((4, "slower"))),
    bind(OWN, &[Char('a')], "next algorithm", Verb::Algo.act(), Some((2, "algorithm"))),
    bind(OWN, &[Char('c')], "next collective", Verb::Coll.act(), Some((2, "collective"))),
    bind(OWN, &[Char('m')], "next message size", Verb::Size.act(), Some((3, "size"))),
    bind(OWN, &[Char('M')], "type a message size (3 MiB, 1000000, 512 MB)", Verb::TypeSize.act(), None),
    bind(OWN, &[Char('L')], "link for time estimates", Verb::Link.act(), Some((3, "link"))),
];

pub fn update(s: &mut RingState, app: &mut App, action: Action) -> Outcome {
    if let Some(field) = &mut s.typing {
        match action {
            Action::Edit(r) => field.apply(r),
            Action::InputCancel => s.typing = None,
            Action::InputSubmit => match typed_size(field.value(), s.params.dtype.size()) {
                Ok(bytes) => {
                    s.typing = None;
                    let params = RingParams { bytes, ..s.params };
                    let note = params.rounding_note().map(|n| format!("{bytes} B {n}"));
                    s.rebuild(params, app);
                    if note.is_some() {
                        app.status = note;
                    }
                }
                Err(e) => app.status = Some(e.to_string()),
            },
            _ => {}
        }
        return Outcome::Stay;
    }
    if let Some((verb, d)) = action.verb(crate::tui::app::ScreenId::Ring, Verb::from_repr) {
        on_verb(s, app, verb, d);
        return Outcome::Stay;
    }
    let len = s.schedule.len();
    match action {
        Action::Tick if s.playing => {
            s.seek(s.step + 1);
            if s.at_end() {
                s.playing = false;
            }
        }
        Action::Top => {
            s.playing = false;
            s.seek(0);
        }
        Action::Bottom => {
            s.playing = false;
            s.seek(len);
        }
        Action::Back => return Outcome::Pop,
        _ => {}
    }
    Outcome::Stay
}

fn on_verb(s: &mut RingState, app: &mut App, verb: Verb, d: i32) {
    match verb {
        Verb::TypeSize => {
            s.playing = false;
            s.typing = Some(Default::default());
        }
        Verb::PlayPause => {
            if s.at_end() {
                s.seek(0);
            }
            s.playing = !s.playing && !s.schedule.is_empty();
        }
        Verb::Step => {
            s.playing = false;
            s.seek(s.step.saturating_add_signed(d as isize));
        }
        Verb::Speed => {
            s.speed = s
                .speed
                .saturating_add_signed(d as isize)
                .min(SPEEDS_MS.len() - 1);
            app.status = Some(format!("speed: {} ms per step", s.tick_ms()));
        }
        Verb::Ranks => change_ranks(s, app, d > 0),
        Verb::Algo if s.params.coll.is_point_to_point() => {
            app.status = Some(format!(
                "{}: one schedule of point-to-point sends, whatever the algorithm",
                s.params.coll
            ));
        }
        Verb::Algo => {
            // The next algorithm with a schedule for this collective.
            let mut algo = s.params.algo.next();
            while !algo.supports(s.params.coll) && algo != s.params.algo {
                algo = algo.next();
            }
            s.rebuild(RingParams { algo, ..s.params }, app)
        }
        Verb::Coll => next_coll(s, app),
        Verb::Size => {
            let bytes = SIZES
                .iter()
                .copied()
                .find(|&b| b > s.params.bytes)
                .unwrap_or(SIZES[0]);
            s.rebuild(RingParams { bytes, ..s.params }, app);
        }
        // The note under the comparison table says what the new link assumes.
        Verb::Link => s.link = (s.link + 1) % LINK_CHOICES,
    }
}

/// More or fewer ranks, keeping the GPUs per node where they still divide them.
fn change_ranks(s: &mut RingState, app: &mut App, up: bool) {
    let ranks = next_ranks(s.params.ranks, up);
    let root = s.params.root.min(ranks - 1);
    let kept = s.params.gpus_per_node;
    let gpus_per_node = if kept > 0 && ranks.is_multiple_of(kept) {
        kept
    } else {
        0
    };
    s.rebuild(
        RingParams {
            ranks,
            root,
            gpus_per_node,
            ..s.params
        },
        app,
    );
    if kept != gpus_per_node && s.node_note().is_none() {
        app.status = Some(format!(
            "N = {ranks}: {kept} GPUs per node no longer divides it; nodes of {} now",
            s.schedule.spec().node_size()
        ));
    }
    if ranks > MAX_DRAWN {
        app.status = Some(format!(
            "N = {ranks}: drawn up to {MAX_DRAWN}; the numbers stay exact"
        ));
    }
}

/// The next collective, with ring where the algorithm shown has no schedule for it.
fn next_coll(s: &mut RingState, app: &mut App) {
    let coll = s.params.coll.next();
    let was = s.params.algo;
    let algo = if was.supports(coll) {
        was
    } else {
        Algorithm::Ring
    };
    s.rebuild(
        RingParams {
            coll,
            algo,
            ..s.params
        },
        app,
    );
    if algo != was && s.params.coll == coll {
        app.status = Some(format!(
            "{coll}: {was} is an all-reduce algorithm; showing ring"
        ));
    }
}

impl crate::tui::screens::View for RingState {
    fn update(&mut self, app: &mut App, action: Action) -> Outcome {
        update(self, app, action)
    }

    fn render(&self, app: &App, frame: &mut ratatui::Frame, area: ratatui::layout::Rect) {
        super::ring_draw::render(self, app, frame, area)
    }

    fn contexts(&self) -> Vec<Context> {
        vec![OWN]
    }

    fn takes_text(&self) -> bool {
        self.typing.is_some()
    }

    fn hint_line(&self, app: &App) -> Option<ratatui::text::Line<'static>> {
        self.typing
            .is_some()
            .then(|| super::typing_hint(app, "sets the size"))
    }

    fn tick(&self, app: &App) -> Option<std::time::Duration> {
        (self.playing && app.help.is_none())
            .then(|| std::time::Duration::from_millis(self.tick_ms()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest typed size is the largest `m` cycles to, and the README says it.
    #[test]
    fn a_size_that_is_not_whole_elements_says_what_it_uses() {
        let mut app = App::new(
            crate::course::Course::embedded(),
            crate::tui::theme::Theme::color(),
        );
        let mut s = RingState::new(RingParams::default()).expect("ring");
        update(&mut s, &mut app, Verb::TypeSize.act());
        for c in "1003".chars() {
            update(
                &mut s,
                &mut app,
                Action::Edit(crate::tui::field::InputRequest::InsertChar(c)),
            );
        }
        update(&mut s, &mut app, Action::InputSubmit);
        assert_eq!(s.params.bytes, 1003);
        assert_eq!(
            app.status.as_deref(),
            Some(
                "1003 B is not a whole number of f32 elements (4 B each): using 1000 B (250 elements)"
            )
        );
    }

    #[test]
    fn typed_sizes_stop_where_the_readme_says() {
        let max = SIZES[SIZES.len() - 1];
        assert_eq!(typed_size("1 GiB", 4), Ok(max));
        assert!(typed_size("1025 MiB", 4).is_err_and(|e| e.to_string().contains("at most 1 GiB")));
        assert!(typed_size("2", 4).is_err());
        let readme = include_str!("../../../README.md");
        assert!(
            readme.contains(&format!("up to {})", format_bytes(max))),
            "README's ring view section states the typed size limit"
        );
    }
}
