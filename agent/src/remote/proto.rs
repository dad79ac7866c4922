//! The generated types and gRPC services of the profiling backends sonde speaks besides OTLP, vendored
//! under `proto/pyroscope` and `proto/parca` (see `proto/README.md`), one module per protobuf package so
//! the generated cross-package paths (`super::super::...`) resolve.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// Pyroscope's `types.v1`.
pub mod types {
    /// `types.v1`: label pairs, profile types.
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/types.v1.rs"));
    }
}

/// Pyroscope's `push.v1`.
pub mod push {
    /// `push.v1`: the `PusherService`.
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/push.v1.rs"));
    }
}

/// Pyroscope's `querier.v1`.
pub mod querier {
    /// `querier.v1`: the `QuerierService`.
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/querier.v1.rs"));
    }
}

/// Pyroscope's copy of pprof, `google.v1`.
pub mod google {
    /// `google.v1`: the pprof `Profile` `SelectMergeProfile` answers with.
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/google.v1.rs"));
    }
}

/// Parca's packages.
pub mod parca {
    /// `parca.profilestore.*`
    pub mod profilestore {
        /// `parca.profilestore.v1alpha1`: the `ProfileStoreService` (`WriteRaw`).
        pub mod v1alpha1 {
            include!(concat!(env!("OUT_DIR"), "/parca.profilestore.v1alpha1.rs"));
        }
    }
    /// `parca.metastore.*`
    pub mod metastore {
        /// `parca.metastore.v1alpha1`: types the query service refers to.
        pub mod v1alpha1 {
            include!(concat!(env!("OUT_DIR"), "/parca.metastore.v1alpha1.rs"));
        }
    }
    /// `parca.query.*`
    pub mod query {
        /// `parca.query.v1alpha1`: the `QueryService` (`Query`, merge mode, pprof report).
        pub mod v1alpha1 {
            include!(concat!(env!("OUT_DIR"), "/parca.query.v1alpha1.rs"));
        }
    }
}
