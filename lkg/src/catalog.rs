//! Test names interned to dense ids, so runs with hundreds of tests are judged without comparing
//! names.

use crate::TestId;
use crate::fast_hash::FastMap;

/// Every test name the algorithm has seen, each with its [`TestId`]. Interning only appends, so
/// ids handed out stay valid.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TestCatalog {
    names: Vec<String>,
    ids: FastMap<String, TestId>,
}

impl TestCatalog {
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of `name`, added if it is new.
    pub fn intern(&mut self, name: &str) -> TestId {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        let id = TestId(u32::try_from(self.names.len()).expect("fewer than 2^32 test names"));
        assert!(id.0 <= crate::CompactResult::MAX_TEST_ID, "at most 2^30 test names");
        self.names.push(name.to_owned());
        self.ids.insert(name.to_owned(), id);
        id
    }

    pub fn id(&self, name: &str) -> Option<TestId> {
        self.ids.get(name).copied()
    }

    /// The name of an id from this catalog.
    pub fn name(&self, id: TestId) -> Option<&str> {
        self.names.get(id.index()).map(String::as_str)
    }

    /// Every name, in id order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_twice_gives_the_same_id_and_ids_are_dense() {
        let mut catalog = TestCatalog::new();
        let a = catalog.intern("a");
        let b = catalog.intern("b");
        assert_eq!((a, b, catalog.intern("a")), (TestId(0), TestId(1), TestId(0)));
        assert_eq!((catalog.name(b), catalog.id("b"), catalog.id("c")), (Some("b"), Some(b), None));
        assert_eq!(catalog.len(), 2);
    }
}
