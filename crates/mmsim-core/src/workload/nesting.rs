//! Nesting limits of workload text: a workload nested deeper than the interpreter and the JSON
//! parser can take is refused, naming the field, before any recursive parser sees it.

use crate::error::Error;

/// Most levels of `loop`, `fork` and `thread` ops one inside another.
pub const MAX_NESTING: usize = 64;
/// Most levels of JSON arrays and objects one inside another: what MAX_NESTING levels of ops
/// take (an object and a list each), with room for the fields of the innermost ops.
pub const MAX_JSON_DEPTH: usize = 2 * MAX_NESTING + 8;

/// One open array or object while scanning JSON text (`check_nesting`).
struct Open<'a> {
    array: bool,
    /// The array index, or the key whose value comes next in an object.
    index: usize,
    key: Option<std::borrow::Cow<'a, str>>,
    /// An array of ops: the workload's `program`, or a `body`/`program` of an op in one.
    ops: bool,
}

/// The path of a field as error messages name it (`program[0].body[2]`); a run of four or
/// more identical steps is written once with its count (`program[1](.body[0] x64)`).
fn open_path(stack: &[Open]) -> String {
    let mut steps: Vec<String> = Vec::new();
    let mut after_key = false;
    for o in stack {
        match (o.array, steps.last_mut()) {
            (true, Some(last)) if after_key => last.push_str(&format!("[{}]", o.index)),
            (true, _) => steps.push(format!("[{}]", o.index)),
            (false, _) => {
                let dot = if steps.is_empty() { "" } else { "." };
                steps.push(format!("{dot}{}", o.key.as_deref().unwrap_or("?")));
            }
        }
        after_key = !o.array;
    }
    let mut out = String::new();
    let mut i = 0;
    while i < steps.len() {
        let run = steps[i..].iter().take_while(|s| **s == steps[i]).count();
        if run >= 4 {
            out.push_str(&format!("({} x{run})", steps[i]));
        } else {
            out.push_str(&steps[i..i + run].concat());
        }
        i += run;
    }
    out
}

/// Refuse workload text nested deeper than MAX_NESTING levels of loop, fork and thread, or
/// MAX_JSON_DEPTH levels of arrays and objects, naming the field; before any recursive parser
/// sees it (one pass, no recursion, nothing allocated per byte). Text that is not valid JSON
/// passes: the parser names its error.
pub(crate) fn check_nesting(text: &str) -> Result<(), Error> {
    let b = text.as_bytes();
    let mut stack: Vec<Open> = Vec::new();
    let mut last_string: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                if i >= b.len() {
                    return Ok(());
                }
                last_string = Some((start, i));
            }
            b':' => {
                if let (Some(top), Some((s, e))) = (stack.last_mut(), last_string) {
                    if !top.array {
                        let raw = &text[s..e];
                        top.key = Some(if raw.contains('\\') {
                            serde_json::from_str::<String>(&text[s - 1..=e]).map_or(raw.into(), Into::into)
                        } else {
                            raw.into()
                        });
                    }
                }
            }
            b',' => {
                if let Some(top) = stack.last_mut() {
                    if top.array {
                        top.index += 1;
                    } else {
                        top.key = None;
                    }
                }
            }
            c @ (b'[' | b'{') => {
                let array = c == b'[';
                let n = stack.len();
                let ops = array
                    && n >= 1
                    && match stack[n - 1].key.as_deref() {
                        Some("program") => n == 1 || (n >= 2 && stack[n - 2].ops),
                        Some("body") => n >= 2 && stack[n - 2].ops,
                        _ => false,
                    };
                if ops && stack.iter().filter(|o| o.ops).count() > MAX_NESTING {
                    return Err(Error::Workload(format!(
                        "{}: nesting deeper than {MAX_NESTING} levels (loop, fork, thread)",
                        open_path(&stack[..n - 1])
                    )));
                }
                if n >= MAX_JSON_DEPTH {
                    let path = open_path(&stack);
                    let sep = if path.is_empty() { "" } else { ": " };
                    return Err(Error::Workload(format!(
                        "{path}{sep}nested deeper than {MAX_JSON_DEPTH} levels of arrays and objects"
                    )));
                }
                stack.push(Open { array, index: 0, key: None, ops });
            }
            b']' | b'}' => {
                let Some(_) = stack.pop() else { return Ok(()) };
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}
