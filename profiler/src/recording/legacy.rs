//! Records of older formats whose shape has changed since, decoded into today's types.
//!
//! Format 5 added `Frame::line`: a `Stack` event of formats 2 to 4 has frames without it.
//! Every other record reads the same in every format.

use serde::Deserialize;

use crate::events::{Event, Frame, FrameKind, Stack, StackId};

use super::Record;

/// `Record::Event` and `Event::Stack`, as postcard numbers enum variants (a one-byte varint
/// each below 128).
const EVENT: u8 = 1;
const STACK: u8 = 1;

#[derive(Deserialize)]
struct OldFrame {
    kind: FrameKind,
    addr: u64,
    name: Option<String>,
    module: Option<String>,
    holds_monitor: bool,
}

#[derive(Deserialize)]
struct OldStack {
    id: StackId,
    frames: Vec<OldFrame>,
}

/// A record of format `version`, or None when it cannot be decoded.
pub fn decode(version: u32, payload: &[u8]) -> Option<Record> {
    if version < 5
        && let [EVENT, STACK, rest @ ..] = payload
    {
        let old: OldStack = postcard::from_bytes(rest).ok()?;
        let frames = old
            .frames
            .into_iter()
            .map(|f| Frame {
                kind: f.kind,
                addr: f.addr,
                name: f.name,
                module: f.module,
                holds_monitor: f.holds_monitor,
                line: None,
            })
            .collect();
        return Some(Record::Event(Event::Stack(Stack { id: old.id, frames })));
    }
    postcard::from_bytes(payload).ok()
}
