//! The little of the protocol buffers wire format a pprof profile needs: varints,
//! length-delimited fields and packed repeated integers.

/// A message being written.
#[derive(Default)]
pub struct Message(pub Vec<u8>);

impl Message {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire_type: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire_type));
    }

    /// An integer field (int64 and uint64 alike: a negative int64 is its two's complement).
    /// Zero is the default, so it is left out.
    pub fn int(&mut self, field: u32, v: u64) -> &mut Self {
        if v != 0 {
            self.key(field, 0);
            self.varint(v);
        }
        self
    }

    pub fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }

    pub fn message(&mut self, field: u32, m: &Message) -> &mut Self {
        self.bytes(field, &m.0)
    }

    /// A packed repeated integer field (left out when empty).
    pub fn packed(&mut self, field: u32, values: impl IntoIterator<Item = u64>) -> &mut Self {
        let mut inner = Message::default();
        for v in values {
            inner.varint(v);
        }
        if !inner.0.is_empty() {
            self.bytes(field, &inner.0);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_encoded_as_the_wire_format_says() {
        let mut m = Message::default();
        m.int(1, 150).int(2, 0).bytes(3, b"hi").packed(4, [1, 300]);
        // 150 is 0x96 0x01 (field 1, varint); field 2 zero is left out; field 3 bytes; field
        // 4 packed: 1 and 300 (0xac 0x02), three bytes.
        assert_eq!(
            m.0,
            [
                0x08, 0x96, 0x01, 0x1a, 2, b'h', b'i', 0x22, 3, 1, 0xac, 0x02
            ]
        );
        let mut neg = Message::default();
        neg.int(1, (-1i64) as u64);
        assert_eq!(neg.0.len(), 11, "a negative int64 takes ten bytes");
    }
}
