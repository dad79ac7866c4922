//! The generated OTLP profiles types (layout v1.10, vendored under `proto/opentelemetry`), one module per
//! protobuf package so the generated cross-package paths (`super::super::...`) resolve.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// `opentelemetry.proto.*`
pub mod opentelemetry {
    /// `opentelemetry.proto.*`
    pub mod proto {
        /// `opentelemetry.proto.common.*`
        pub mod common {
            /// `opentelemetry.proto.common.v1`
            pub mod v1 {
                include!(concat!(
                    env!("OUT_DIR"),
                    "/opentelemetry.proto.common.v1.rs"
                ));
            }
        }
        /// `opentelemetry.proto.resource.*`
        pub mod resource {
            /// `opentelemetry.proto.resource.v1`
            pub mod v1 {
                include!(concat!(
                    env!("OUT_DIR"),
                    "/opentelemetry.proto.resource.v1.rs"
                ));
            }
        }
        /// `opentelemetry.proto.profiles.*`
        pub mod profiles {
            /// `opentelemetry.proto.profiles.v1development`
            pub mod v1development {
                include!(concat!(
                    env!("OUT_DIR"),
                    "/opentelemetry.proto.profiles.v1development.rs"
                ));
            }
        }
        /// `opentelemetry.proto.collector.*`
        pub mod collector {
            /// `opentelemetry.proto.collector.profiles.*`
            pub mod profiles {
                /// `opentelemetry.proto.collector.profiles.v1development`: the `ProfilesService`.
                pub mod v1development {
                    include!(concat!(
                        env!("OUT_DIR"),
                        "/opentelemetry.proto.collector.profiles.v1development.rs"
                    ));
                }
            }
        }
    }
}

pub use opentelemetry::proto::collector::profiles::v1development as collector;
pub use opentelemetry::proto::common::v1 as common;
pub use opentelemetry::proto::profiles::v1development as profiles;
pub use opentelemetry::proto::resource::v1 as resource;
