//! PyTorch's flight-recorder dumps (pickles): read into the same [`RankTrace`] as ringlab's own.

use super::*;

/// A pickle's plain data as JSON (PyTorch's dumps hold only dicts, lists, tuples, strings,
/// numbers, booleans and None).
pub(super) fn pickle_to_json(v: serde_pickle::Value) -> serde_json::Value {
    use serde_json::Value as J;
    use serde_pickle::Value as P;
    let key = |k: serde_pickle::HashableValue| match k {
        serde_pickle::HashableValue::String(s) => s,
        other => format!("{other:?}"),
    };
    match v {
        P::None => J::Null,
        P::Bool(b) => J::Bool(b),
        P::I64(i) => J::from(i),
        P::Int(i) => J::String(i.to_string()),
        P::F64(f) => serde_json::Number::from_f64(f).map_or(J::Null, J::Number),
        P::Bytes(b) => J::String(String::from_utf8_lossy(&b).into_owned()),
        P::String(s) => J::String(s),
        P::List(l) | P::Tuple(l) => J::Array(l.into_iter().map(pickle_to_json).collect()),
        P::Set(s) | P::FrozenSet(s) => J::Array(s.into_iter().map(|h| J::String(key(h))).collect()),
        P::Dict(d) => J::Object(
            d.into_iter()
                .map(|(k, v)| (key(k), pickle_to_json(v)))
                .collect(),
        ),
    }
}

/// PyTorch's dtype names as ringlab's.
pub(super) fn torch_dtype(name: &str) -> String {
    match name {
        "Float" => "f32",
        "Half" => "f16",
        "BFloat16" => "bf16",
        "Double" => "f64",
        "Int" => "i32",
        "Long" => "i64",
        "Byte" => "u8",
        "Char" => "i8",
        other => other,
    }
    .to_string()
}

/// A PyTorch Flight Recorder dump (the pickle, or its JSON form) as a rank's trace. The rank is
/// the number the file name ends with (`rank1.pkl`, `comm_lib_trace_rank_1`); entries are
/// lined up by `collective_seq_id`. gloo never moves an entry's `state` past "scheduled":
/// `retired` (left the in-flight list) counts as completed, an entry still in flight as
/// started.
pub(super) fn from_pytorch(file: &str, v: &serde_json::Value) -> Result<RankTrace, TraceError> {
    let err = |message: String| TraceError {
        file: file.to_string(),
        message,
    };
    let version = v.get("version").and_then(|x| x.as_str()).unwrap_or("?");
    let major = version
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok());
    if major != Some(2) {
        return Err(err(format!(
            "PyTorch Flight Recorder version {version}; ringlab reads the 2.x dumps (collective_seq_id)"
        )));
    }
    let stem = Path::new(file)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let digits: String = stem
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let rank: usize = digits.parse().map_err(|_| {
        err("the file name does not end with the rank (rank1.pkl, …_rank_1)".into())
    })?;
    // The default group's ranks, "[0, 1, 2]", where the dump has them.
    let world = v
        .get("pg_config")
        .and_then(|p| p.as_object())
        .and_then(|m| {
            m.values()
                .find_map(|g| g.get("ranks").and_then(|r| r.as_str()))
        })
        .map_or(0, |r| {
            r.split(',')
                .filter(|x| !x.trim().trim_matches(['[', ']']).is_empty())
                .count()
        });
    let entries = v
        .get("entries")
        .and_then(|e| e.as_array())
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let Some(seq) = e
            .get("collective_seq_id")
            .and_then(serde_json::Value::as_u64)
        else {
            return Err(err(format!("entry {i}: no collective_seq_id")));
        };
        out.extend(entry(e, seq));
    }
    out.sort_by_key(|e| e.seq);
    out.dedup_by_key(|e| e.seq);
    Ok(RankTrace {
        format: "pytorch-flight-recorder".into(),
        version: VERSION,
        rank,
        world: world.max(rank + 1),
        process: Process::Running,
        entries: out,
        source: file.to_string(),
    })
}

/// One collective of a dump (entry `e`, numbered `seq`); None for point-to-point entries.
fn entry(e: &serde_json::Value, seq: u64) -> Option<Entry> {
    let field = |k: &str| e.get(k);
    if field("is_p2p").and_then(serde_json::Value::as_bool) == Some(true) {
        return None;
    }
    let name = field("profiling_name")
        .and_then(|x| x.as_str())
        .unwrap_or("?");
    let (lib, op) = name.rsplit_once(':').unwrap_or(("", name));
    let sizes = field("input_sizes").cloned().unwrap_or_default();
    let count: u64 = sizes
        .as_array()
        .map(|ts| {
            ts.iter()
                .map(|t| {
                    t.as_array()
                        .map_or(0, |d| d.iter().filter_map(|x| x.as_u64()).product::<u64>())
                })
                .sum()
        })
        .unwrap_or(0);
    let dtype = field("input_dtypes")
        .and_then(|d| d.as_array())
        .and_then(|d| d.first())
        .and_then(|d| d.as_str())
        .map_or_else(|| "?".into(), torch_dtype);
    let retired = field("retired")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    let state = match field("state").and_then(|s| s.as_str()) {
        Some("completed") => State::Completed,
        _ if retired => State::Completed,
        Some("started") => State::Started,
        // gloo: in flight is as far as it says.
        _ if lib == "gloo" => State::Started,
        _ => State::Scheduled,
    };
    let ns = |k: &str| {
        field(k)
            .and_then(serde_json::Value::as_u64)
            .filter(|&t| t > 0)
    };
    Some(Entry {
        seq,
        call: Call {
            coll: op.split_whitespace().next().unwrap_or(op).replace('_', "-"),
            algo: lib.to_string(),
            count,
            dtype,
            op: String::new(),
            root: -1,
            shape: Some(sizes.to_string()),
        },
        state,
        label: Some(name.to_string()),
        scheduled_ns: ns("time_created_ns").unwrap_or(0),
        started_ns: ns("time_discovered_started_ns"),
        completed_ns: ns("time_discovered_completed_ns"),
    })
}
