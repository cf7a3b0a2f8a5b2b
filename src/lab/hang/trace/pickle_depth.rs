//! How deeply a pickle's containers nest, found by walking its opcodes without building
//! anything. serde_pickle converts (and Rust drops) nested values recursively, so a 16 KB
//! pickle of lists in lists overflowed the stack and aborted `doctor --trace` (finding M3):
//! a dump nested deeper than [`MAX_DEPTH`] is refused before it is parsed. PyTorch's dumps
//! nest about five deep. Opcodes and their arguments as in CPython's Lib/pickletools.py.

/// The deepest nesting `doctor --trace` reads.
pub const MAX_DEPTH: usize = 200;

/// A stack slot: a mark, or a value and how deeply it nests.
#[derive(Clone, Copy)]
enum Slot {
    Mark,
    Value(usize),
}

fn read_n(b: &[u8], at: usize, n: usize) -> Option<u64> {
    let s = b.get(at..at + n)?;
    let mut v = 0u64;
    for (i, byte) in s.iter().enumerate() {
        v |= u64::from(*byte) << (8 * i);
    }
    Some(v)
}

/// Bytes of an opcode's argument after the opcode at `at`, or None for an opcode this
/// walk does not know (the parser then says what is wrong).
fn arg_len(b: &[u8], at: usize, op: u8) -> Option<usize> {
    let line = |from: usize| {
        b.get(from..)?
            .iter()
            .position(|&c| c == b'\n')
            .map(|i| i + 1)
    };
    let counted = |width: usize| -> Option<usize> {
        let n = usize::try_from(read_n(b, at + 1, width)?).ok()?;
        width.checked_add(n)
    };
    Some(match op {
        b'.' | b'N' | 0x88 | 0x89 | b']' | b'}' | b')' | 0x8f | b'(' | b'a' | b'e' | b's'
        | b'u' | b't' | 0x85 | 0x86 | 0x87 | b'l' | b'd' | 0x90 | 0x91 | 0x93 | b'R' | b'b'
        | 0x81 | 0x92 | b'o' | b'0' | b'1' | b'2' | 0x94 | b'Q' | 0x97 | 0x98 => 0,
        0x80 | b'K' | b'U' | b'C' | 0x8c | b'q' | b'h' | 0x82 => {
            if matches!(op, b'U' | b'C' | 0x8c) {
                counted(1)?
            } else {
                1
            }
        }
        b'M' | 0x83 => 2,
        b'J' | b'r' | b'j' | 0x84 => 4,
        b'G' => 8,
        0x95 => 8,
        0x8a => counted(1)?,
        0x8b | b'T' | b'X' | b'B' => counted(4)?,
        0x8d | 0x8e | 0x96 => counted(8)?,
        b'I' | b'L' | b'F' | b'S' | b'V' | b'P' | b'p' | b'g' => line(at + 1)?,
        b'c' | b'i' => {
            let first = line(at + 1)?;
            first + line(at + 1 + first)?
        }
        _ => return None,
    })
}

/// The deepest nesting of containers the pickle builds (an overestimate where memo
/// references are involved), stopping early once past `limit`.
pub fn depth(b: &[u8], limit: usize) -> usize {
    let mut stack: Vec<Slot> = Vec::new();
    let mut deepest = 0;
    let mut at = 0;
    let pop = |stack: &mut Vec<Slot>| match stack.pop() {
        Some(Slot::Value(d)) => d,
        _ => 0,
    };
    // The values above the last mark, taken off with it: the deepest of them.
    let to_mark = |stack: &mut Vec<Slot>| {
        let mut d = 0;
        while let Some(s) = stack.pop() {
            match s {
                Slot::Mark => break,
                Slot::Value(v) => d = d.max(v),
            }
        }
        d
    };
    while let Some(&op) = b.get(at) {
        let Some(len) = arg_len(b, at, op) else { break };
        match op {
            b'.' => break,
            b']' | b'}' | b')' | 0x8f => stack.push(Slot::Value(1)),
            b'(' => stack.push(Slot::Mark),
            b'a' => {
                let v = pop(&mut stack);
                let l = pop(&mut stack);
                stack.push(Slot::Value(l.max(v + 1)));
            }
            b's' => {
                let v = pop(&mut stack);
                let k = pop(&mut stack);
                let d = pop(&mut stack);
                stack.push(Slot::Value(d.max(v.max(k) + 1)));
            }
            b'e' | b'u' | 0x90 => {
                let items = to_mark(&mut stack);
                let c = pop(&mut stack);
                stack.push(Slot::Value(c.max(items + 1)));
            }
            b't' | b'l' | b'd' | 0x91 | b'o' | b'i' => {
                let items = to_mark(&mut stack);
                stack.push(Slot::Value(items + 1));
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                let items = (0..n).map(|_| pop(&mut stack)).max().unwrap_or(0);
                stack.push(Slot::Value(items + 1));
            }
            b'0' => {
                stack.pop();
            }
            b'1' => {
                to_mark(&mut stack);
            }
            b'2' => {
                let top = stack.last().copied().unwrap_or(Slot::Value(0));
                stack.push(top);
            }
            // Memo references: the value may have grown since it was stored; count it as
            // deep as anything so far.
            b'g' | b'h' | b'j' => stack.push(Slot::Value(deepest)),
            // Calls and builds: arguments in, one value out.
            0x93 | b'R' | 0x81 => {
                let a = pop(&mut stack);
                let f = pop(&mut stack);
                stack.push(Slot::Value(a.max(f) + 1));
            }
            0x92 => {
                let a = pop(&mut stack).max(pop(&mut stack)).max(pop(&mut stack));
                stack.push(Slot::Value(a + 1));
            }
            b'b' => {
                let s = pop(&mut stack);
                let o = pop(&mut stack);
                stack.push(Slot::Value(o.max(s + 1)));
            }
            b'Q' => {
                let v = pop(&mut stack);
                stack.push(Slot::Value(v + 1));
            }
            0x80 | 0x95 | b'p' | b'q' | b'r' | 0x94 | 0x98 => {}
            _ => stack.push(Slot::Value(0)),
        }
        if let Some(Slot::Value(d)) = stack.last() {
            deepest = deepest.max(*d);
        }
        if deepest > limit {
            return deepest;
        }
        at += 1 + len;
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested_lists(n: usize) -> Vec<u8> {
        let mut b = vec![0x80, 2];
        b.extend(std::iter::repeat_n(b']', n));
        b.extend(std::iter::repeat_n(b'a', n - 1));
        b.push(b'.');
        b
    }

    #[test]
    fn lists_in_lists_count_their_depth() {
        assert_eq!(depth(&nested_lists(1), 1000), 1);
        assert_eq!(depth(&nested_lists(7), 1000), 7);
        assert!(depth(&nested_lists(200_000), MAX_DEPTH) > MAX_DEPTH);
    }

    #[test]
    fn a_dict_of_a_list_of_tuples_is_three_deep() {
        // {"entries": [(1, "x")]} as protocol 2 writes it.
        let mut b = vec![0x80, 2, b'}', 0x8c, 7];
        b.extend_from_slice(b"entries");
        b.extend_from_slice(&[b']', b'K', 1, 0x8c, 1, b'x', 0x86, b'a', b's', b'.']);
        assert_eq!(depth(&b, 1000), 3);
    }
}
