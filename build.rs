//! Compiles the vendored Perfetto proto subset (`proto/perfetto/trace.proto`) into Rust with
//! prost. protox parses the .proto in pure Rust, so no system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/perfetto/trace.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
