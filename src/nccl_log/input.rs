//! Logs as engineers paste them: behind a launcher's prefix, coloured, with Windows line ends,
//! several ranks interleaved. [`clean`] takes one raw line to the text NCCL wrote and the
//! label of whoever the launcher says wrote it; [`super::parse_line`] reads what is left.
//!
//! The prefixes, as each tool writes them:
//! - Open MPI `mpirun --tag-output`: `[1,0]<stdout>:` (job, rank; no space after);
//! - Slurm `srun -l`: `0: ` (the task number, right-aligned by width);
//! - torchrun `--tee`/`--log-dir` and PyTorch's own: `[rank0]:`, `[default0]:`; another
//!   launcher's `[trainer3]:`;
//! - `kubectl logs --timestamps`: an RFC 3339 time and a space;
//! - journald (`journalctl`): `Mar 05 10:11:12 host prog[123]: `;
//! - docker compose: `svc_1  | ` (the service padded to the widest name);
//! - pdsh and DeepSpeed's launcher: `worker-1: ` (a host name and `: `).
//!
//! A prefix is taken off only where what is left still reads as an NCCL line or banner, so a
//! program's own `Error: …` is never cut.

use std::borrow::Cow;

/// Who the launcher says wrote a line.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// Open MPI's `[job,rank]`, srun's task, torchrun's `[rankN]`/`[defaultN]`.
    Rank(u32),
    /// A compose service, a pdsh host, a journald unit.
    Named(String),
}

/// One raw line, cleaned: the text NCCL wrote and who wrote it, where a prefix says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cleaned<'a> {
    pub text: Cow<'a, str>,
    pub source: Option<Source>,
    /// The launcher's time stamp (kubectl, journald), where there was one.
    pub stamp: Option<String>,
}

/// Take ANSI escape sequences (colour, cursor moves) out of `s`: CSI `ESC [ … final`, OSC
/// `ESC ] … BEL` or `ESC ] … ESC \`, and two-byte `ESC x`.
pub fn strip_ansi(s: &str) -> Cow<'_, str> {
    if !s.contains('\x1b') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('[') => {
                for d in it.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
            Some(']') => {
                while let Some(d) = it.next() {
                    if d == '\x07' || (d == '\x1b' && it.next_if_eq(&'\\').is_some()) {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    Cow::Owned(out)
}

/// `[1,0]<stdout>:` → rank 0.
fn mpirun(s: &str) -> Option<(Source, &str)> {
    let rest = s.strip_prefix('[')?;
    let (ids, rest) = rest.split_once(']')?;
    let (_, rank) = ids.split_once(',')?;
    let rank = rank.trim().parse().ok()?;
    let rest = rest
        .strip_prefix("<stdout>:")
        .or_else(|| rest.strip_prefix("<stderr>:"))
        .or_else(|| rest.strip_prefix("<stddiag>:"))?;
    Some((Source::Rank(rank), rest))
}

/// `[rank0]:` / `[default0]:` → rank 0.
fn torchrun(s: &str) -> Option<(Source, &str)> {
    let rest = s.strip_prefix('[')?;
    let (tag, rest) = rest.split_once("]:")?;
    let n = tag
        .strip_prefix("rank")
        .or_else(|| tag.strip_prefix("default"))?;
    Some((
        Source::Rank(n.parse().ok()?),
        rest.strip_prefix(' ').unwrap_or(rest),
    ))
}

/// Any other launcher's `[label]:` (a job step's `[trainer3]:`, `[trainer0|0]:`): a label
/// without spaces, so a time stamp in brackets is left alone.
fn bracketed(s: &str) -> Option<(Source, &str)> {
    let rest = s.strip_prefix('[')?;
    let (tag, rest) = rest.split_once("]:")?;
    let ok = !tag.is_empty() && tag.len() <= 40 && !tag.contains(char::is_whitespace);
    ok.then(|| {
        (
            Source::Named(tag.to_string()),
            rest.strip_prefix(' ').unwrap_or(rest),
        )
    })
}

/// `0: ` / ` 12: ` → task 0 / 12.
fn srun(s: &str) -> Option<(Source, &str)> {
    let t = s.trim_start();
    let (n, rest) = t.split_once(": ")?;
    if n.is_empty() || n.len() > 6 || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((Source::Rank(n.parse().ok()?), rest))
}

/// `svc_1  | ` → svc_1.
fn compose(s: &str) -> Option<(Source, &str)> {
    let (name, rest) = s.split_once(" | ").or_else(|| s.split_once(" |"))?;
    let name = name.trim_end();
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    ok.then(|| {
        (
            Source::Named(name.to_string()),
            rest.strip_prefix(' ').unwrap_or(rest),
        )
    })
}

/// `worker-1: ` → worker-1 (pdsh, DeepSpeed's launcher).
fn host_colon(s: &str) -> Option<(Source, &str)> {
    let (name, rest) = s.split_once(": ")?;
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    ok.then(|| (Source::Named(name.to_string()), rest))
}

/// `2024-03-05T10:11:12.123456789Z ` (kubectl --timestamps) → the stamp.
fn rfc3339(s: &str) -> Option<(String, &str)> {
    let (stamp, rest) = s.split_once(' ')?;
    let b = stamp.as_bytes();
    let shaped = b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[..4].iter().all(u8::is_ascii_digit);
    shaped.then(|| (stamp.to_string(), rest))
}

/// `Mar 05 10:11:12 host prog[123]: ` (journald) → the stamp and the program.
fn journald(s: &str) -> Option<(String, Source, &str)> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = s.get(..3)?;
    if !MONTHS.contains(&month) {
        return None;
    }
    let mut parts = s.splitn(5, ' ').filter(|p| !p.is_empty());
    let (_, day, time) = (parts.next()?, parts.next()?, parts.next()?);
    if !day.bytes().all(|b| b.is_ascii_digit()) || time.len() != 8 || &time[2..3] != ":" {
        return None;
    }
    let at = s.find(time)? + time.len();
    let rest = s[at..].trim_start();
    let (_host, rest) = rest.split_once(' ')?;
    let (prog, rest) = rest.split_once(": ")?;
    if prog.contains(' ') {
        return None;
    }
    let name = prog.split('[').next().unwrap_or(prog);
    Some((
        format!("{month} {day} {time}"),
        Source::Named(name.to_string()),
        rest,
    ))
}

/// Does `s` read as an NCCL line or banner (what is left after a prefix)?
pub fn looks_nccl(s: &str) -> bool {
    [" NCCL INFO ", " NCCL WARN ", " NCCL TRACE "]
        .iter()
        .any(|t| s.contains(t) || s.starts_with(&t[1..]))
        || s.contains("NCCL version")
        || super::legacy_tag(s).is_some()
}

/// One raw line to the text NCCL wrote: colour and `\r` gone, launcher prefixes taken off
/// (several may stack: a kubectl time stamp, then `[rank0]:`).
pub fn clean(raw: &str) -> Cleaned<'_> {
    let text = strip_ansi(raw.trim_end_matches(['\n', '\r']));
    let mut source = None;
    let mut stamp = None;
    let mut cur: &str = &text;
    for _ in 0..4 {
        let t = cur.trim_start_matches('\u{feff}');
        if let Some((s, rest)) = rfc3339(t) {
            stamp = Some(s);
            cur = rest;
            continue;
        }
        if let Some((s, who, rest)) = journald(t).filter(|(_, _, r)| looks_nccl(r)) {
            stamp = Some(s);
            source = Some(who);
            cur = rest;
            continue;
        }
        let stripped = mpirun(t)
            .or_else(|| torchrun(t))
            .or_else(|| bracketed(t))
            .or_else(|| srun(t).filter(|(_, r)| looks_nccl(r)))
            .or_else(|| compose(t).filter(|(_, r)| looks_nccl(r)))
            .or_else(|| host_colon(t).filter(|(_, r)| looks_nccl(r)));
        match stripped {
            Some((who, rest)) => {
                source.get_or_insert(who);
                cur = rest;
            }
            None => break,
        }
    }
    let start = text.len() - cur.len();
    let text = match text {
        Cow::Borrowed(b) => Cow::Borrowed(&b[start..]),
        Cow::Owned(o) => Cow::Owned(o[start..].to_string()),
    };
    Cleaned {
        text,
        source,
        stamp,
    }
}

/// PyTorch quotes NCCL's last WARN under its error (`ncclSystemError: …` / `Last error:` /
/// the message, from `ncclGetLastError`, NCCL 2.13+; c10d's `getNcclErrorDetailStr`): is `prev`
/// (cleaned) the line that announces it?
pub fn announces_last_error(prev: &str) -> bool {
    prev.trim_end().ends_with("Last error:")
}

/// A paste that ran PyTorch's lines together keeps the quoted message on the same line:
/// `… Last error: 10: socketStartConnect: Connect to …`. The message, prefixes taken off.
pub fn inline_last_error(text: &str) -> Option<String> {
    let (_, after) = text.split_once("Last error: ")?;
    let after = after.trim_start();
    // The launcher's prefix of the next line, run in: `10: ` (srun -l), `[rank0]: `.
    let after = srun(after)
        .or_else(|| torchrun(after))
        .map_or(after, |(_, rest)| rest);
    let c = clean(after);
    let t = c.text.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// nccl-tests' own failure line (its `CUDACHECK`/`NCCLCHECK` in src/common.h print
/// `HOST: Test CUDA failure FILE:LINE 'ERROR'` and `… Test NCCL failure …`): the message from
/// `Test` on.
pub fn nccl_tests_failure(text: &str) -> Option<&str> {
    ["Test CUDA failure ", "Test NCCL failure "]
        .iter()
        .find_map(|k| text.find(k).map(|i| &text[i..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "node1:123:456 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>";

    #[test]
    fn every_launcher_prefix_comes_off_and_names_its_rank() {
        for (raw, who) in [
            (format!("[1,3]<stdout>:{LINE}"), Some(Source::Rank(3))),
            (format!("  3: {LINE}"), Some(Source::Rank(3))),
            (format!("[rank3]: {LINE}"), Some(Source::Rank(3))),
            (format!("[default3]:{LINE}"), Some(Source::Rank(3))),
            (
                format!("[trainer0|0]:{LINE}"),
                Some(Source::Named("trainer0|0".into())),
            ),
            (
                format!("trainer_1  | {LINE}"),
                Some(Source::Named("trainer_1".into())),
            ),
            (
                format!("worker-1: {LINE}"),
                Some(Source::Named("worker-1".into())),
            ),
            (
                format!("Mar 05 10:11:12 gpu7 python[2231]: {LINE}"),
                Some(Source::Named("python".into())),
            ),
            (format!("2024-03-05T10:11:12.123456789Z {LINE}"), None),
            (
                format!("2024-03-05T10:11:12.1Z [rank3]:{LINE}\r"),
                Some(Source::Rank(3)),
            ),
            (format!("\x1b[32m{LINE}\x1b[0m\r\n"), None),
        ] {
            let c = clean(&raw);
            assert_eq!(c.text, LINE, "{raw:?}");
            assert_eq!(c.source, who, "{raw:?}");
        }
    }

    #[test]
    fn a_programs_own_text_keeps_its_words() {
        for raw in [
            "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269",
            "Epoch 3: loss 0.25",
            "12: not an nccl line",
        ] {
            assert_eq!(clean(raw).text, raw);
        }
    }

    #[test]
    fn osc_and_csi_sequences_are_removed_whole() {
        assert_eq!(strip_ansi("a\x1b]0;title\x07b\x1b[1;31mc\x1b[0m"), "abc");
        assert_eq!(strip_ansi("a\x1b]8;;x\x1b\\b"), "ab");
        assert_eq!(strip_ansi("cut\x1b["), "cut");
    }

    #[test]
    fn pytorchs_quoted_last_error_is_found_on_its_line_or_the_next() {
        assert!(announces_last_error("[rank0]: Last error:"));
        assert!(!announces_last_error("Last error: something"));
        assert_eq!(
            inline_last_error("10: ncclSystemError: x. 10: Last error: 10: socketStartConnect: Connect to 127.0.0.1<1> failed : E")
                .as_deref(),
            Some("socketStartConnect: Connect to 127.0.0.1<1> failed : E")
        );
    }
}
