//! Quiz items: the TOML inside ```` ```quiz ```` blocks, parsed into a typed [`Item`] and
//! validated with positions (what `ringlab check` reports), then instantiated per attempt:
//! a parametric item draws its numbers from `[params]` and gets its answer from the
//! schedule/cost model through [`super::compute`], never from a formula typed into the quiz.
//!
//! ```toml
//! id = "ring-bytes"                # unique across the course and the drills
//! type = "numeric"                 # single | multi | numeric | order | recall
//! prompt = "Ring all-reduce, N = {N}, M = {M} bytes: bytes each rank sends?"
//! answer_from = "ring_allreduce_bytes_per_rank"   # or: answer = 117440512
//! tolerance = 0.01                 # relative; numeric items must have one
//! unit = "B"                       # B | GB/s | us (optional)
//! explanation = "2 x ({N}-1)/{N} x {M} = {answer}"
//! source = "Patarasuk and Yuan, 2009"
//! tags = ["ring"]
//! follow_ups = ["other-item-id", { prompt = "…", answer = "…" }]
//! [params]                         # last: every key after it belongs to it
//! N = [2, 4, 8, 16]                # a list …
//! M = { min = 1048576, max = 8388608, step = 1048576 }   # … or a range
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use toml::Spanned;

use super::block::offset_to_line_col;
use super::compute;

/// The five kinds of item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Single,
    Multi,
    Numeric,
    Order,
    Recall,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Single,
        Kind::Multi,
        Kind::Numeric,
        Kind::Order,
        Kind::Recall,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Single => "single",
            Kind::Multi => "multi",
            Kind::Numeric => "numeric",
            Kind::Order => "order",
            Kind::Recall => "recall",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }

    /// What the learner does, in words (the name is for quiz files).
    pub fn title(self) -> &'static str {
        match self {
            Kind::Single => "pick one",
            Kind::Multi => "pick all that apply",
            Kind::Numeric => "a number",
            Kind::Order => "put in order",
            Kind::Recall => "recall",
        }
    }
}

/// The unit a numeric answer is given in. Answers may be typed in any unit of the same family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// Bytes ("B"); answers may use KB/MB/GB (powers of 1000) or KiB/MiB/GiB (powers of 1024).
    Bytes,
    /// Gigabytes per second ("GB/s", 1 GB = 1e9 bytes), as nccl-tests prints them.
    GbPerS,
    /// Microseconds ("us"); answers may use ns, µs, ms, s.
    Micros,
}

impl Unit {
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::Bytes => "B",
            Unit::GbPerS => "GB/s",
            Unit::Micros => "us",
        }
    }

    /// The unit as a learner reads it on screen (µs, as the lessons write it); `symbol` is
    /// the quiz block's spelling, which `--json` keeps. Either is accepted in an answer.
    pub fn shown(self) -> &'static str {
        match self {
            Unit::Micros => "µs",
            u => u.symbol(),
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "B" => Some(Unit::Bytes),
            "GB/s" => Some(Unit::GbPerS),
            "us" | "µs" => Some(Unit::Micros),
            _ => None,
        }
    }
}

/// The expected answer, as written (numeric ones may be computed instead).
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// single: index into `choices`.
    Choice(usize),
    /// multi: indices into `choices`, sorted, no duplicates.
    Choices(Vec<usize>),
    /// order: every choice index once, in the right order.
    Order(Vec<usize>),
    /// numeric, written down.
    Number(f64),
    /// numeric, computed by the named [`compute`] function from the drawn parameters.
    Computed(String),
    /// recall: the model answer the learner compares their own against.
    Model(String),
}

/// How a parameter draws its value for each attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamSpec {
    List(Vec<f64>),
    /// min, min+step, …, up to max.
    Range {
        min: f64,
        max: f64,
        step: f64,
    },
}

impl ParamSpec {
    /// Number of distinct values.
    pub fn len(&self) -> usize {
        match self {
            ParamSpec::List(v) => v.len(),
            ParamSpec::Range { min, max, step } => ((max - min) / step).floor() as usize + 1,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The i-th value (i < len).
    pub fn value(&self, i: usize) -> f64 {
        match self {
            ParamSpec::List(v) => v.get(i).copied().unwrap_or(0.0),
            ParamSpec::Range { min, step, .. } => min + step * i as f64,
        }
    }
}

/// A quiz item, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub id: String,
    pub kind: Kind,
    pub prompt: String,
    pub choices: Vec<String>,
    pub answer: Answer,
    /// Relative tolerance for numeric items (0.01 = 1%); 0 for the others.
    pub tolerance: f64,
    pub unit: Option<Unit>,
    pub explanation: String,
    pub source: String,
    pub tags: Vec<String>,
    /// Ids of the items an interviewer would ask next (inline ones become items `ID.1`, `ID.2`…).
    pub follow_ups: Vec<String>,
    pub params: BTreeMap<String, ParamSpec>,
    /// Inline follow-ups, already turned into items.
    pub inline: Vec<Item>,
}

/// A problem in a quiz block: 1-based line and column within the block body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    id: Spanned<String>,
    #[serde(rename = "type")]
    kind: Spanned<String>,
    prompt: Spanned<String>,
    #[serde(default)]
    choices: Option<Spanned<Vec<String>>>,
    answer: Option<Spanned<toml::Value>>,
    answer_from: Option<Spanned<String>>,
    tolerance: Option<Spanned<f64>>,
    unit: Option<Spanned<String>>,
    #[serde(default)]
    explanation: Option<Spanned<String>>,
    #[serde(default)]
    source: String,
    #[serde(default)]
    tags: Vec<String>,
    follow_ups: Option<Spanned<Vec<toml::Value>>>,
    #[serde(default)]
    params: BTreeMap<String, Spanned<toml::Value>>,
}

/// An inline follow-up: a recall question asked right after its parent.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InlineRaw {
    id: Option<String>,
    prompt: String,
    answer: String,
    #[serde(default)]
    explanation: String,
    #[serde(default)]
    source: String,
    #[serde(default)]
    tags: Vec<String>,
}

struct Ctx<'a> {
    body: &'a str,
    id: String,
}

impl Ctx<'_> {
    fn err(&self, offset: usize, message: impl std::fmt::Display) -> ItemError {
        let (line, col) = offset_to_line_col(self.body, offset);
        ItemError {
            line,
            col,
            message: format!("quiz item `{}`: {message}", self.id),
        }
    }
}

impl Kind {
    /// What an item of this kind gives as its `answer`, for a missing one.
    fn answer_hint(self) -> &'static str {
        match self {
            Kind::Single => "the index of the right choice, from 0",
            Kind::Multi => "the indices of the right choices, e.g. [0, 2]",
            Kind::Order => "the choice indices in the right order, e.g. [2, 0, 1]",
            Kind::Numeric => "a number, or `answer_from` with [params]",
            Kind::Recall => "the model answer as a string",
        }
    }
}

/// Parse and validate one ```` ```quiz ```` block body.
pub fn parse(body: &str) -> Result<Item, ItemError> {
    let raw: Raw = toml::from_str(body).map_err(|e| {
        let (line, col) = e
            .span()
            .map(|s| offset_to_line_col(body, s.start))
            .unwrap_or((1, 1));
        ItemError {
            line,
            col,
            message: format!("malformed ```quiz block: {}", e.message()),
        }
    })?;
    let cx = Ctx {
        body,
        id: raw.id.get_ref().clone(),
    };
    if raw.id.get_ref().trim().is_empty() {
        return Err(cx.err(raw.id.span().start, "`id` is empty"));
    }
    let kind = Kind::parse(raw.kind.get_ref()).ok_or_else(|| {
        cx.err(
            raw.kind.span().start,
            format!(
                "unknown type `{}` (single | multi | numeric | order | recall)",
                raw.kind.get_ref()
            ),
        )
    })?;
    let choices = raw
        .choices
        .as_ref()
        .map(|c| c.get_ref().clone())
        .unwrap_or_default();
    let params = parse_params(&cx, &raw.params)?;
    let answer = parse_answer(&cx, &raw, kind, &choices, &params)?;
    let (tolerance, unit) = parse_numeric(&cx, &raw, kind)?;
    check_template(&cx, &raw.prompt, &params, false)?;
    if let Some(e) = &raw.explanation {
        check_template(&cx, e, &params, matches!(answer, Answer::Computed(_)))?;
    }
    let (follow_ups, inline) = parse_follow_ups(&cx, &raw)?;
    let item = Item {
        id: cx.id.clone(),
        kind,
        prompt: raw.prompt.get_ref().trim().to_string(),
        choices,
        answer,
        tolerance,
        unit,
        explanation: raw
            .explanation
            .as_ref()
            .map(|e| e.get_ref().trim().to_string())
            .unwrap_or_default(),
        source: raw.source.trim().to_string(),
        tags: raw.tags.clone(),
        follow_ups,
        params,
        inline,
    };
    // Every draw must instantiate to a finite answer (catches an N the schedule rejects, or a
    // busbw at N = 1): every combination where there are few, else every corner.
    if matches!(item.answer, Answer::Computed(_)) {
        let at = raw.answer_from.as_ref().map_or(0, |a| a.span().start);
        let sizes: Vec<usize> = item.params.values().map(|p| p.len().max(1)).collect();
        let total = sizes.iter().try_fold(1usize, |a, &n| a.checked_mul(n));
        match total {
            Some(total) if total <= 4096 => {
                for k in 0..total {
                    let mut rest = k;
                    let mut idx = sizes.iter().map(|&n| {
                        let i = rest % n;
                        rest /= n;
                        i
                    });
                    if let Err(e) = item.instantiate_with(|_| idx.next().unwrap_or(0)) {
                        return Err(cx.err(at, e));
                    }
                }
            }
            _ => {
                for corner in [0usize, usize::MAX] {
                    if let Err(e) =
                        item.instantiate_with(|spec| corner.min(spec.len().saturating_sub(1)))
                    {
                        return Err(cx.err(at, e));
                    }
                }
            }
        }
    }
    Ok(item)
}

fn parse_params(
    cx: &Ctx,
    raw: &BTreeMap<String, Spanned<toml::Value>>,
) -> Result<BTreeMap<String, ParamSpec>, ItemError> {
    let mut out = BTreeMap::new();
    for (name, v) in raw {
        let at = v.span().start;
        if !is_ident(name) || name == "answer" {
            return Err(cx.err(at, format!("bad parameter name `{name}`")));
        }
        let num = |x: &toml::Value| match x {
            toml::Value::Integer(i) => Some(*i as f64),
            toml::Value::Float(f) if f.is_finite() => Some(*f),
            _ => None,
        };
        let spec = match v.get_ref() {
            toml::Value::Array(a) => {
                let vals: Option<Vec<f64>> = a.iter().map(num).collect();
                match vals {
                    Some(v) if !v.is_empty() => ParamSpec::List(v),
                    _ => {
                        return Err(cx.err(
                            at,
                            format!("parameter `{name}`: a list needs at least one number"),
                        ));
                    }
                }
            }
            toml::Value::Table(t) => {
                let get = |k: &str| t.get(k).and_then(num);
                for k in t.keys() {
                    if !matches!(k.as_str(), "min" | "max" | "step") {
                        return Err(cx.err(
                            at,
                            format!("parameter `{name}`: unknown key `{k}` (min, max, step)"),
                        ));
                    }
                }
                let (Some(min), Some(max)) = (get("min"), get("max")) else {
                    return Err(cx.err(
                        at,
                        format!("parameter `{name}`: a range needs numeric `min` and `max`"),
                    ));
                };
                let step = get("step").unwrap_or(1.0);
                if step <= 0.0 || max < min {
                    return Err(cx.err(
                        at,
                        format!("parameter `{name}`: need min <= max and step > 0"),
                    ));
                }
                if (max - min) / step > 1e6 {
                    return Err(cx.err(
                        at,
                        format!("parameter `{name}`: more than a million values; raise `step`"),
                    ));
                }
                ParamSpec::Range { min, max, step }
            }
            _ => {
                return Err(cx.err(
                    at,
                    format!(
                        "parameter `{name}`: write a list ([2, 4, 8]) or a range ({{ min = 1, max = 8, step = 1 }})"
                    ),
                ));
            }
        };
        out.insert(name.clone(), spec);
    }
    Ok(out)
}

fn parse_answer(
    cx: &Ctx,
    raw: &Raw,
    kind: Kind,
    choices: &[String],
    params: &BTreeMap<String, ParamSpec>,
) -> Result<Answer, ItemError> {
    let choices_at = raw.choices.as_ref().map_or(0, |c| c.span().start);
    if matches!(kind, Kind::Single | Kind::Multi | Kind::Order) && choices.len() < 2 {
        return Err(cx.err(
            choices_at,
            format!("a {} item needs at least 2 `choices`", kind.name()),
        ));
    }
    if matches!(kind, Kind::Numeric | Kind::Recall) && !choices.is_empty() {
        return Err(cx.err(
            choices_at,
            format!("a {} item has no `choices`", kind.name()),
        ));
    }
    if let Some(from) = &raw.answer_from {
        return computed_answer(cx, raw, kind, from, params);
    }
    let Some(answer) = &raw.answer else {
        return Err(cx.err(0, format!("missing `answer` ({})", kind.answer_hint())));
    };
    let at = answer.span().start;
    let n = choices.len();
    let index = |v: &toml::Value| -> Result<usize, ItemError> {
        match v {
            toml::Value::Integer(i) if *i >= 0 && (*i as usize) < n => Ok(*i as usize),
            toml::Value::Integer(i) => Err(cx.err(
                at,
                format!(
                    "answer {i} is not among the {n} choices (indices 0..={})",
                    n - 1
                ),
            )),
            other => Err(cx.err(
                at,
                format!("answer must be a choice index, got {}", other.type_str()),
            )),
        }
    };
    let list = |v: &toml::Value| -> Result<Vec<usize>, ItemError> {
        match v {
            toml::Value::Array(a) => a.iter().map(index).collect(),
            other => Err(cx.err(
                at,
                format!(
                    "answer must be a list of choice indices, got {}",
                    other.type_str()
                ),
            )),
        }
    };
    match kind {
        Kind::Single => Ok(Answer::Choice(index(answer.get_ref())?)),
        Kind::Multi => {
            let v = list(answer.get_ref())?;
            let set: BTreeSet<usize> = v.iter().copied().collect();
            if set.is_empty() || set.len() != v.len() {
                return Err(cx.err(at, "answer must name at least one choice, each once"));
            }
            Ok(Answer::Choices(set.into_iter().collect()))
        }
        Kind::Order => {
            let v = list(answer.get_ref())?;
            let set: BTreeSet<usize> = v.iter().copied().collect();
            if v.len() != n || set.len() != n {
                return Err(cx.err(
                    at,
                    format!("answer must list every one of the {n} choices exactly once"),
                ));
            }
            Ok(Answer::Order(v))
        }
        Kind::Numeric => match answer.get_ref() {
            toml::Value::Integer(i) => Ok(Answer::Number(*i as f64)),
            toml::Value::Float(f) if f.is_finite() => Ok(Answer::Number(*f)),
            other => Err(cx.err(
                at,
                format!("answer must be a number, got {}", other.type_str()),
            )),
        },
        Kind::Recall => match answer.get_ref() {
            toml::Value::String(s) if !s.trim().is_empty() => {
                Ok(Answer::Model(s.trim().to_string()))
            }
            _ => Err(cx.err(at, "answer must be the model answer as a non-empty string")),
        },
    }
}

/// `answer_from = "NAME"`: a numeric item's answer computed from its [params], each of which
/// the computation needs.
fn computed_answer(
    cx: &Ctx,
    raw: &Raw,
    kind: Kind,
    from: &toml::Spanned<String>,
    params: &BTreeMap<String, ParamSpec>,
) -> Result<Answer, ItemError> {
    let at = from.span().start;
    if kind != Kind::Numeric {
        return Err(cx.err(at, "`answer_from` is for numeric items"));
    }
    if raw.answer.is_some() {
        return Err(cx.err(at, "give `answer` or `answer_from`, not both"));
    }
    let name = from.get_ref();
    let Some(c) = compute::find(name) else {
        return Err(cx.err(
            at,
            format!(
                "unknown computation `{name}` in `answer_from` (known: {})",
                compute::names().join(", ")
            ),
        ));
    };
    for p in c.params {
        if !params.contains_key(*p) {
            return Err(cx.err(at, format!("`{name}` needs parameter `{p}` in [params]")));
        }
    }
    Ok(Answer::Computed(name.clone()))
}

fn parse_numeric(cx: &Ctx, raw: &Raw, kind: Kind) -> Result<(f64, Option<Unit>), ItemError> {
    if kind != Kind::Numeric {
        if let Some(t) = &raw.tolerance {
            return Err(cx.err(t.span().start, "`tolerance` is for numeric items"));
        }
        if let Some(u) = &raw.unit {
            return Err(cx.err(u.span().start, "`unit` is for numeric items"));
        }
        return Ok((0.0, None));
    }
    let Some(tol) = &raw.tolerance else {
        return Err(cx.err(
            raw.answer
                .as_ref()
                .map(|a| a.span().start)
                .or(raw.answer_from.as_ref().map(|a| a.span().start))
                .unwrap_or(0),
            "numeric item without `tolerance` (relative: 0.01 accepts 1% either side, 0 wants the exact number)",
        ));
    };
    let t = *tol.get_ref();
    if !(0.0..1.0).contains(&t) {
        return Err(cx.err(
            tol.span().start,
            "`tolerance` is relative and must be in 0 <= t < 1",
        ));
    }
    let unit = match &raw.unit {
        None => None,
        Some(u) => Some(Unit::parse(u.get_ref()).ok_or_else(|| {
            cx.err(
                u.span().start,
                format!("unknown unit `{}` (B | GB/s | us)", u.get_ref()),
            )
        })?),
    };
    Ok((t, unit))
}

fn parse_follow_ups(cx: &Ctx, raw: &Raw) -> Result<(Vec<String>, Vec<Item>), ItemError> {
    let (mut ids, mut inline) = (Vec::new(), Vec::new());
    let Some(list) = &raw.follow_ups else {
        return Ok((ids, inline));
    };
    let at = list.span().start;
    for v in list.get_ref() {
        match v {
            toml::Value::String(s) if !s.trim().is_empty() => ids.push(s.trim().to_string()),
            toml::Value::Table(_) => {
                let r: InlineRaw = v.clone().try_into().map_err(|e: toml::de::Error| {
                    cx.err(at, format!("inline follow-up: {}", e.message()))
                })?;
                let id =
                    r.id.unwrap_or_else(|| format!("{}.{}", cx.id, inline.len() + 1));
                if r.prompt.trim().is_empty() || r.answer.trim().is_empty() {
                    return Err(cx.err(at, "inline follow-up needs `prompt` and `answer`"));
                }
                ids.push(id.clone());
                inline.push(Item {
                    id,
                    kind: Kind::Recall,
                    prompt: r.prompt.trim().to_string(),
                    choices: Vec::new(),
                    answer: Answer::Model(r.answer.trim().to_string()),
                    tolerance: 0.0,
                    unit: None,
                    explanation: r.explanation.trim().to_string(),
                    source: if r.source.trim().is_empty() {
                        raw.source.trim().to_string()
                    } else {
                        r.source.trim().to_string()
                    },
                    tags: if r.tags.is_empty() {
                        raw.tags.clone()
                    } else {
                        r.tags
                    },
                    follow_ups: Vec::new(),
                    params: BTreeMap::new(),
                    inline: Vec::new(),
                });
            }
            _ => {
                return Err(cx.err(
                    at,
                    "follow_ups holds item ids (strings) or inline { prompt, answer } tables",
                ));
            }
        }
    }
    Ok((ids, inline))
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A `{NAME}` or `{NAME:fmt}` placeholder: byte range in the text, name, format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    pub start: usize,
    pub end: usize,
    pub name: String,
    pub fmt: Option<String>,
}

/// Placeholders in a template. Braces around anything that is not an identifier (`{0, 1}`)
/// are left alone as text.
pub fn placeholders(text: &str) -> Vec<Placeholder> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(open) = text[i..].find('{').map(|o| o + i) {
        let Some(close) = text[open..].find('}').map(|c| c + open) else {
            break;
        };
        let inner = &text[open + 1..close];
        let (name, fmt) = match inner.split_once(':') {
            Some((n, f)) => (n, Some(f.to_string())),
            None => (inner, None),
        };
        if is_ident(name) {
            out.push(Placeholder {
                start: open,
                end: close + 1,
                name: name.to_string(),
                fmt,
            });
            i = close + 1;
        } else {
            i = open + 1;
        }
    }
    out
}

const FORMATS: [&str; 1] = ["bytes"];

fn check_template(
    cx: &Ctx,
    text: &Spanned<String>,
    params: &BTreeMap<String, ParamSpec>,
    allow_answer: bool,
) -> Result<(), ItemError> {
    // Where the string's characters start in the body: after the opening quote(s).
    let span = text.span();
    let src = cx.body.get(span.clone()).unwrap_or("");
    for p in placeholders(text.get_ref()) {
        let token = &text.get_ref()[p.start..p.end];
        let at = src.find(token).map_or(span.start, |o| span.start + o);
        let known = params.contains_key(&p.name) || (allow_answer && p.name == "answer");
        if !known {
            let declared: Vec<&str> = params.keys().map(String::as_str).collect();
            return Err(cx.err(
                at,
                format!(
                    "unknown parameter `{}` in template (declared in [params]: {})",
                    p.name,
                    if declared.is_empty() {
                        "none".to_string()
                    } else {
                        declared.join(", ")
                    }
                ),
            ));
        }
        if let Some(f) = &p.fmt
            && !FORMATS.contains(&f.as_str())
        {
            return Err(cx.err(
                at,
                format!("unknown format `:{f}` for `{}` (known: bytes)", p.name),
            ));
        }
    }
    Ok(())
}

/// One attempt at an item: the prompt with its numbers filled in and the answer to grade against.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    pub prompt: String,
    pub explanation: String,
    /// The expected answer (Computed already resolved to Number).
    pub answer: Answer,
    /// Drawn parameter values, by name.
    pub values: BTreeMap<String, f64>,
}

impl Item {
    pub fn is_parametric(&self) -> bool {
        !self.params.is_empty()
    }

    /// Draw this attempt's parameters from `seed` and fill in prompt, explanation and answer.
    pub fn instantiate(&self, seed: u64) -> Result<Instance, String> {
        let mut rng = SplitMix(seed);
        self.instantiate_with(|spec| (rng.next_u64() % spec.len().max(1) as u64) as usize)
    }

    /// Instantiate with each parameter's value index chosen by `pick`.
    pub fn instantiate_with(
        &self,
        mut pick: impl FnMut(&ParamSpec) -> usize,
    ) -> Result<Instance, String> {
        let values: BTreeMap<String, f64> = self
            .params
            .iter()
            .map(|(k, spec)| {
                let i = pick(spec).min(spec.len().saturating_sub(1));
                (k.clone(), spec.value(i))
            })
            .collect();
        let answer = match &self.answer {
            Answer::Computed(name) => {
                let c =
                    compute::find(name).ok_or_else(|| format!("unknown computation `{name}`"))?;
                let x = (c.run)(&values).map_err(|e| format!("`{name}`: {e}"))?;
                if !x.is_finite() {
                    return Err(format!(
                        "`{name}` gives {x} for {}: not an answer anyone can type",
                        values
                            .iter()
                            .map(|(k, v)| format!("{k} = {}", format_number(*v)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                Answer::Number(x)
            }
            other => other.clone(),
        };
        let mut with_answer = values.clone();
        if let Answer::Number(x) = answer {
            with_answer.insert("answer".into(), x);
        }
        Ok(Instance {
            prompt: fill(&self.prompt, &values),
            explanation: fill(&self.explanation, &with_answer),
            answer,
            values,
        })
    }
}

/// A prompt as a one-line title for lists (missed items): its first sentence, backticks
/// dropped, `{N}` and `{M:bytes}` shown as N and M, cut to `max` characters with an ellipsis.
pub fn short_prompt(prompt: &str, max: usize) -> String {
    let mut text = prompt.split_whitespace().collect::<Vec<_>>().join(" ");
    for p in placeholders(&text).into_iter().rev() {
        text.replace_range(p.start..p.end, &p.name);
    }
    let text = text.replace('`', "");
    let first = match text.find(". ") {
        Some(i) if i + 1 < text.len() => &text[..=i],
        _ => &text[..],
    };
    if first.chars().count() <= max {
        first.to_string()
    } else {
        let cut: String = first.chars().take(max.saturating_sub(1)).collect();
        format!("{}…", cut.trim_end())
    }
}

/// Fill `{NAME}` / `{NAME:bytes}` placeholders; unknown ones stay as written.
pub fn fill(text: &str, values: &BTreeMap<String, f64>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for p in placeholders(text) {
        let Some(v) = values.get(&p.name) else {
            continue;
        };
        out.push_str(&text[last..p.start]);
        match p.fmt.as_deref() {
            Some("bytes") if *v >= 0.0 => {
                out.push_str(&crate::units::format_bytes_natural(v.round() as u64));
            }
            _ => out.push_str(&format_number(*v)),
        }
        last = p.end;
    }
    out.push_str(&text[last..]);
    out
}

/// A number as people write it: integers plainly, others with up to 4 decimals, trailing
/// zeros dropped.
pub fn format_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        return format!("{}", v as i64);
    }
    let s = format!("{v:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A tiny deterministic generator (SplitMix64) for drawing parameters.
#[derive(Debug, Clone)]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_prompt_becomes_a_short_title() {
        assert_eq!(
            short_prompt("Each of {N} ranks holds `{M:bytes}`. How many bytes?", 60),
            "Each of N ranks holds M."
        );
        let long = short_prompt(&"word ".repeat(40), 20);
        assert_eq!(long.chars().count(), 20, "{long}");
        assert!(long.ends_with('…'));
    }

    use super::*;

    fn err(body: &str) -> ItemError {
        parse(body).expect_err("must fail")
    }

    #[test]
    fn single_item_parses() {
        let it = parse(
            "id = \"a\"\ntype = \"single\"\nprompt = \"p\"\nchoices = [\"x\", \"y\"]\nanswer = 1\nexplanation = \"e\"\nsource = \"s\"\n",
        )
        .expect("parses");
        assert_eq!(it.answer, Answer::Choice(1));
        assert_eq!(it.kind, Kind::Single);
    }

    #[test]
    fn missing_answer_is_reported() {
        let e = err("id = \"a\"\ntype = \"single\"\nprompt = \"p\"\nchoices = [\"x\", \"y\"]\n");
        assert!(e.message.contains("missing `answer`"), "{}", e.message);
        assert_eq!((e.line, e.col), (1, 1));
    }

    #[test]
    fn answer_outside_choices_points_at_the_answer() {
        let e = err(
            "id = \"a\"\ntype = \"single\"\nprompt = \"p\"\nchoices = [\"x\", \"y\"]\nanswer = 2\n",
        );
        assert!(
            e.message.contains("not among the 2 choices"),
            "{}",
            e.message
        );
        assert_eq!((e.line, e.col), (5, 10));
    }

    #[test]
    fn numeric_needs_tolerance() {
        let e = err("id = \"a\"\ntype = \"numeric\"\nprompt = \"p\"\nanswer = 3\n");
        assert!(e.message.contains("without `tolerance`"), "{}", e.message);
        assert_eq!(e.line, 4);
    }

    #[test]
    fn unknown_template_parameter_points_into_the_prompt() {
        let e = err(
            "id = \"a\"\ntype = \"numeric\"\nprompt = \"N = {N}, M = {Q}\"\nanswer_from = \"ring_allreduce_bytes_per_rank\"\ntolerance = 0.01\n[params]\nN = [4]\nM = [1024]\n",
        );
        assert!(e.message.contains("unknown parameter `Q`"), "{}", e.message);
        assert_eq!((e.line, e.col), (3, 24));
    }

    #[test]
    fn order_must_be_a_permutation() {
        let e = err(
            "id = \"a\"\ntype = \"order\"\nprompt = \"p\"\nchoices = [\"x\", \"y\", \"z\"]\nanswer = [0, 0, 1]\n",
        );
        assert!(e.message.contains("exactly once"), "{}", e.message);
    }

    #[test]
    fn parametric_item_computes_from_the_schedule() {
        let it = parse(
            "id = \"a\"\ntype = \"numeric\"\nprompt = \"N = {N}, M = {M:bytes}\"\nanswer_from = \"ring_allreduce_bytes_per_rank\"\ntolerance = 0.01\nunit = \"B\"\nexplanation = \"= {answer}\"\n[params]\nN = [8]\nM = { min = 1048576, max = 1048576 }\n",
        )
        .expect("parses");
        let inst = it.instantiate(7).expect("instance");
        assert_eq!(inst.prompt, "N = 8, M = 1 MiB");
        assert_eq!(inst.answer, Answer::Number(1835008.0));
        assert_eq!(inst.explanation, "= 1835008");
    }

    #[test]
    fn a_draw_whose_computed_answer_is_not_finite_is_a_check_error() {
        // 10^15 bytes in 10^-300 µs: an algbw past f64's range, for one of the draws only.
        let e = err(
            "id = \"a\"\ntype = \"numeric\"\nprompt = \"{M} in {T}\"\nanswer_from = \"algbw\"\ntolerance = 0.01\n[params]\nM = [1000, 1000000000000000]\nT = [1e-300, 10]\n",
        );
        assert!(e.message.contains("gives inf"), "{}", e.message);
        assert_eq!(e.line, 4, "points at answer_from");
    }

    #[test]
    fn inline_follow_ups_become_items() {
        let it = parse(
            "id = \"a\"\ntype = \"recall\"\nprompt = \"p\"\nanswer = \"m\"\nfollow_ups = [\"b\", { prompt = \"why?\", answer = \"because\" }]\n",
        )
        .expect("parses");
        assert_eq!(it.follow_ups, vec!["b".to_string(), "a.1".to_string()]);
        assert_eq!(it.inline[0].id, "a.1");
    }

    #[test]
    fn braces_that_are_not_identifiers_are_text() {
        assert!(placeholders("a {0, 1} set").is_empty());
        assert_eq!(placeholders("{N} and {M:bytes}").len(), 2);
    }
}
