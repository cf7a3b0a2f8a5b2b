//! The ring view: a collective played step by step from its schedule. A step is data, so
//! stepping back is exact: the state after k steps is a replay of steps 0..k.

use crate::collective::{
    Algorithm, Collective, Contributions, Dtype, Estimate, LINK_PRESETS, Schedule, Spec, Traffic,
    estimate, sent_through, traffic,
};
use crate::course::block::RingBlock;
use crate::tui::app::{Action, App, Outcome};
use crate::units::format_bytes;

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
    pub op: Collective,
    pub algo: Algorithm,
    pub ranks: usize,
    pub bytes: u64,
    pub dtype: Dtype,
    /// Root of broadcast/reduce (and the hub of naive, the top of tree).
    pub root: usize,
}

impl Default for RingParams {
    fn default() -> Self {
        Self {
            op: Collective::AllReduce,
            algo: Algorithm::Ring,
            ranks: 4,
            bytes: 1 << 20,
            dtype: Dtype::F32,
            root: 0,
        }
    }
}

impl RingParams {
    /// Parameters of a ```` ```ring ```` block in a lesson.
    pub fn from_block(b: &RingBlock) -> Result<Self, String> {
        let s = b.resolve().map_err(|(_, e)| e)?;
        let p = Self {
            op: s.op,
            algo: s.algo,
            ranks: s.ranks,
            bytes: s.bytes,
            dtype: s.dtype,
            root: 0,
        };
        // `resolve` has checked what `validate` would.
        Ok(p)
    }

    pub fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_RANKS).contains(&self.ranks) {
            return Err(format!("ranks must be 1..={MAX_RANKS}, got {}", self.ranks));
        }
        self.spec()
            .and_then(|s| Schedule::check(&s).map_err(|e| e.to_string()))
    }

    /// Whole elements of the message (a partial element is dropped).
    pub fn count(&self) -> usize {
        (self.bytes / self.dtype.size() as u64) as usize
    }

    pub fn spec(&self) -> Result<Spec, String> {
        Ok(Spec {
            root: self.root,
            ..Spec::new(
                self.op,
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
    pub max_link: u64,
    pub estimate: Estimate,
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
    /// Index into LINK_PRESETS used for time estimates.
    pub link: usize,
}

impl RingState {
    pub fn new(params: RingParams) -> Result<Self, String> {
        let spec = params.spec()?;
        let schedule = Schedule::build(&spec).map_err(|e| e.to_string())?;
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
        };
        s.compare = compare(&spec, &LINK_PRESETS[s.link]);
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
                *self = next;
            }
            Err(e) => app.status = Some(e),
        }
    }

    /// Jump to the state after `step` steps (clamped), recomputing it from the schedule.
    pub fn seek(&mut self, step: usize) {
        self.step = step.min(self.schedule.len());
        self.sent = sent_through(&self.schedule, self.step);
        self.contrib = (self.params.ranks <= MAX_DRAWN)
            .then(|| Contributions::after(&self.schedule, self.step).ok())
            .flatten();
    }

    pub fn at_end(&self) -> bool {
        self.step >= self.schedule.len()
    }

    pub fn tick_ms(&self) -> u64 {
        SPEEDS_MS[self.speed.min(SPEEDS_MS.len() - 1)]
    }

    /// "reduce-scatter step 2 of 3" for the step just applied, or what comes first.
    pub fn phase_text(&self) -> String {
        let n = self.schedule.len();
        if n == 0 {
            return "nothing to move: with one rank (or an empty buffer) there are no steps".into();
        }
        if self.step == 0 {
            return match self.schedule.phase_position(0) {
                Some((p, _, k)) => format!("ready: {p} comes first ({k} step{})", plural(k)),
                None => String::new(),
            };
        }
        match self.schedule.phase_position(self.step - 1) {
            Some((p, i, k)) => format!("{p} step {i} of {k}  ·  step {} of {n} overall", self.step),
            None => String::new(),
        }
    }

    pub fn title(&self) -> String {
        let p = &self.params;
        format!(
            "{} · {} · N = {} · M = {} ({} × {})",
            p.op.name(),
            p.algo.name(),
            p.ranks,
            format_bytes(p.count() as u64 * p.dtype.size() as u64),
            p.count(),
            p.dtype.name()
        )
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Ring, naive and tree on the same collective, N and M.
pub fn compare(spec: &Spec, link: &crate::collective::Link) -> Vec<Compare> {
    Algorithm::ALL
        .iter()
        .filter_map(|&algo| {
            let s = Schedule::build(&Spec { algo, ..*spec }).ok()?;
            let t = traffic(&s);
            Some(Compare {
                algo,
                steps: t.steps,
                max_sent: t.per_rank.iter().map(|r| r.bytes_sent).max().unwrap_or(0),
                max_received: t
                    .per_rank
                    .iter()
                    .map(|r| r.bytes_received)
                    .max()
                    .unwrap_or(0),
                max_link: t.max_link_bytes,
                estimate: estimate(&s, link),
            })
        })
        .collect()
}

fn next_ranks(n: usize, up: bool) -> usize {
    match (up, n) {
        (true, n) if n < MAX_DRAWN => n + 1,
        (true, n) => (n * 2).min(MAX_RANKS),
        (false, n) if n > MAX_DRAWN => (n / 2).max(MAX_DRAWN),
        (false, n) => n.saturating_sub(1).max(2),
    }
}

pub fn update(s: &mut RingState, app: &mut App, action: Action) -> Outcome {
    let len = s.schedule.len();
    match action {
        Action::PlayPause => {
            if s.at_end() {
                s.seek(0);
            }
            s.playing = !s.playing && len > 0;
        }
        Action::Tick if s.playing => {
            s.seek(s.step + 1);
            if s.at_end() {
                s.playing = false;
            }
        }
        Action::Step(d) => {
            s.playing = false;
            s.seek(s.step.saturating_add_signed(d as isize));
        }
        Action::Top => {
            s.playing = false;
            s.seek(0);
        }
        Action::Bottom => {
            s.playing = false;
            s.seek(len);
        }
        Action::Speed(d) => {
            s.speed = s
                .speed
                .saturating_add_signed(d as isize)
                .min(SPEEDS_MS.len() - 1);
            app.status = Some(format!("speed: {} ms per step", s.tick_ms()));
        }
        Action::Ranks(d) => {
            let ranks = next_ranks(s.params.ranks, d > 0);
            let root = s.params.root.min(ranks - 1);
            s.rebuild(
                RingParams {
                    ranks,
                    root,
                    ..s.params
                },
                app,
            );
            if ranks > MAX_DRAWN {
                app.status = Some(format!(
                    "N = {ranks}: drawn up to {MAX_DRAWN}; the numbers stay exact"
                ));
            }
        }
        Action::CycleAlgo => s.rebuild(
            RingParams {
                algo: s.params.algo.next(),
                ..s.params
            },
            app,
        ),
        Action::CycleOp => s.rebuild(
            RingParams {
                op: s.params.op.next(),
                ..s.params
            },
            app,
        ),
        Action::CycleSize => {
            let bytes = SIZES
                .iter()
                .copied()
                .find(|&b| b > s.params.bytes)
                .unwrap_or(SIZES[0]);
            s.rebuild(RingParams { bytes, ..s.params }, app);
        }
        Action::CycleLink => {
            s.link = (s.link + 1) % LINK_PRESETS.len();
            let spec = Spec {
                algo: s.params.algo,
                ..s.schedule.spec().to_owned()
            };
            s.compare = compare(&spec, &LINK_PRESETS[s.link]);
            app.status = Some(format!(
                "estimates for {}: {}",
                LINK_PRESETS[s.link].name, LINK_PRESETS[s.link].note
            ));
        }
        Action::Back => return Outcome::Pop,
        _ => {}
    }
    Outcome::Stay
}
