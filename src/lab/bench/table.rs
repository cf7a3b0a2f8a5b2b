//! nccl-tests' table, so a learner can lay this output beside a real cluster's.

use crate::comm::cpu::tcp::{Transport, Transports};
use crate::lab::bench::{Row, Summary};

pub fn header(title: &str) -> String {
    format!(
        "# {title}\n#\n\
#                                                              out-of-place                       in-place          \n\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n\
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "
    )
}

/// The comment line that says how the bytes travelled, before the first row: each transport
/// the ranks chose (NCCL's ladder, first that connects: P2P, SHM, NET) and what it is.
pub fn transport_line(transports: &Transports) -> String {
    let what = |t: Transport| match t {
        Transport::P2p => format!(
            "single copy between the ranks of this node (each maps its partners' buffers; \
             messages under {} through the shared-memory FIFO)",
            crate::units::format_bytes(crate::comm::cpu::cma::min() as u64)
        ),
        Transport::Shm => {
            "shared memory between the ranks of this node (copied in, copied out)".into()
        }
        Transport::Net(_) => {
            "sockets: to other nodes, or everywhere with NCCL_SHM_DISABLE=1".into()
        }
    };
    let each: Vec<Transport> = transports.iter().collect();
    match each.as_slice() {
        [] => format!("#  Transport: {transports}"),
        [one] => format!("#  Transport: {transports}, {}", what(*one)),
        many => {
            let parts: Vec<String> = many
                .iter()
                .map(|&t| format!("{}: {}", t.name(), what(t)))
                .collect();
            format!("#  Transport: {transports}; {}", parts.join("; "))
        }
    }
}

fn time(us: f64) -> String {
    if !us.is_finite() {
        format!("{:>7}", "N/A")
    } else if us >= 10000.0 {
        format!("{us:7.0}")
    } else if us >= 100.0 {
        format!("{us:7.1}")
    } else {
        format!("{us:7.2}")
    }
}

/// One table line from the out-of-place and in-place rows of a size; a placement that did not
/// run (its time is NaN) reads N/A, as nccl-tests prints what it did not measure.
pub fn line(out: &Row, inp: &Row) -> String {
    let gb = |v: f64| {
        if v.is_finite() {
            format!("{v:>6.2}")
        } else {
            format!("{:>6}", "N/A")
        }
    };
    // nccl-tests v2.19.6 `src/util.cu:507-510`: N/A where the result is not checked.
    let wrong = |r: &Row| match r.wrong {
        Some(w) if r.time_us.is_finite() => format!("{w:>5}"),
        _ => format!("{:>5}", "N/A"),
    };
    format!(
        "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}  {}  {}  {}  {}  {}  {}  {}  {}",
        out.size,
        out.count,
        out.dtype,
        out.redop,
        out.root,
        time(out.time_us),
        gb(out.algbw_gbps),
        gb(out.busbw_gbps),
        wrong(out),
        time(inp.time_us),
        gb(inp.algbw_gbps),
        gb(inp.busbw_gbps),
        wrong(inp)
    )
}

/// The line for a size that did not finish: where the row would be, what stopped it.
pub fn failed_line(size: u64, kind: &str, reason: &str) -> String {
    // The reason may already start with the kind ("HANG: rank 1 …"): say it once.
    let reason = reason
        .strip_prefix(kind)
        .and_then(|r| r.strip_prefix(": "))
        .unwrap_or(reason);
    format!("{size:>12}  {kind}: {reason}")
}

pub fn footer(s: &Summary) -> String {
    // Nothing checked reads N/A (ringlab's: nccl-tests would print "0 OK" for -c 0).
    let oob = match s.wrong_total {
        None => "N/A (nothing checked)".to_string(),
        Some(0) => "0 OK".to_string(),
        Some(w) => format!("{w} ERROR"),
    };
    format!(
        "# Out of bounds values : {oob}\n# Avg bus bandwidth    : {:.6} \n#",
        s.avg_busbw_gbps
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Collective;

    #[test]
    fn a_line_has_the_nccl_tests_columns() {
        let row = |in_place| Row {
            coll: Collective::AllReduce,
            backend: "tcp",
            algo: "ring".into(),
            ranks: 2,
            size: 1024,
            count: 256,
            dtype: "float",
            redop: "sum",
            root: -1,
            in_place,
            time_us: 23.21,
            algbw_gbps: 0.04,
            busbw_gbps: 0.04,
            wrong: Some(0),
            transport: None,
            shared_gpu: false,
            spread: None,
        };
        let l = line(&row(false), &row(true));
        let cols: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(
            cols,
            [
                "1024", "256", "float", "sum", "-1", "23.21", "0.04", "0.04", "0", "23.21", "0.04",
                "0.04", "0"
            ]
        );
        // A placement that did not run (NCCL's in-place all-to-all) reads N/A, not NaN or 0.
        let na = Row {
            time_us: f64::NAN,
            algbw_gbps: f64::NAN,
            busbw_gbps: f64::NAN,
            ..row(true)
        };
        let l = line(&row(false), &na);
        let cols: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(cols[9..], ["N/A", "N/A", "N/A", "N/A"], "{l}");
        // A failed size says its kind once.
        assert_eq!(
            failed_line(1024, "HANG", "HANG: rank 1 gave up"),
            "        1024  HANG: rank 1 gave up"
        );
    }

    #[test]
    fn footer_reads_like_nccl_tests() {
        let s = Summary {
            summary: true,
            avg_busbw_gbps: 1.5,
            wrong_total: Some(0),
            ranks: 2,
            backend: "tcp",
            transport: None,
        };
        let f = footer(&s);
        assert!(f.contains("# Out of bounds values : 0 OK"), "{f}");
        assert!(f.contains("# Avg bus bandwidth    : 1.500000"), "{f}");
    }
}
