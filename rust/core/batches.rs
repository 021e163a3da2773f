//! Index batches as the samplers hand them out: one flat index buffer and batch offsets, so a
//! whole epoch crosses into Python as two arrays instead of a list per batch.

/// Batch `b` is `indices[offsets[b]..offsets[b + 1]]`; `offsets` starts at 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batches {
    pub indices: Vec<i64>,
    pub offsets: Vec<i64>,
}

impl Default for Batches {
    fn default() -> Self {
        Batches {
            indices: Vec::new(),
            offsets: vec![0],
        }
    }
}

impl Batches {
    pub fn push(&mut self, batch: impl IntoIterator<Item = i64>) {
        self.indices.extend(batch);
        self.offsets.push(self.indices.len() as i64);
    }

    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn get(&self, batch: usize) -> &[i64] {
        &self.indices[self.offsets[batch] as usize..self.offsets[batch + 1] as usize]
    }

    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = &[i64]> {
        (0..self.len()).map(|b| self.get(b))
    }
}
