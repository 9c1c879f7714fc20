//! [`MapperRef`]: the mapper of a unit of work, shared without copying it.

use std::fmt;
use std::sync::Arc;

use outbox_core::mapping::ContractMapper;

/// The mapper of a unit of work, shared without copying it: a `&'static` reference or an
/// `Arc`. Made by `From`, so constructors take `&OrderingContracts` (a unit struct
/// expression is promoted to `'static`), `&MAPPER` (a `static`) or `Arc::new(mapper)` (a
/// mapper built at run time) alike.
pub struct MapperRef<E: 'static>(MapperKind<E>);

enum MapperKind<E: 'static> {
    Static(&'static dyn ContractMapper<E>),
    Shared(Arc<dyn ContractMapper<E>>),
}

impl<E: 'static> MapperRef<E> {
    pub(super) fn get(&self) -> &dyn ContractMapper<E> {
        match &self.0 {
            MapperKind::Static(mapper) => *mapper,
            MapperKind::Shared(mapper) => &**mapper,
        }
    }
}

impl<E: 'static> Clone for MapperRef<E> {
    fn clone(&self) -> Self {
        Self(match &self.0 {
            MapperKind::Static(mapper) => MapperKind::Static(*mapper),
            MapperKind::Shared(mapper) => MapperKind::Shared(Arc::clone(mapper)),
        })
    }
}

impl<E: 'static> fmt::Debug for MapperRef<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            MapperKind::Static(_) => "MapperRef::Static",
            MapperKind::Shared(_) => "MapperRef::Shared",
        })
    }
}

impl<E: 'static, M: ContractMapper<E> + 'static> From<&'static M> for MapperRef<E> {
    fn from(mapper: &'static M) -> Self {
        Self(MapperKind::Static(mapper))
    }
}

impl<E: 'static, M: ContractMapper<E> + 'static> From<Arc<M>> for MapperRef<E> {
    fn from(mapper: Arc<M>) -> Self {
        Self(MapperKind::Shared(mapper))
    }
}

impl<E: 'static> From<Arc<dyn ContractMapper<E>>> for MapperRef<E> {
    fn from(mapper: Arc<dyn ContractMapper<E>>) -> Self {
        Self(MapperKind::Shared(mapper))
    }
}
