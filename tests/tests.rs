//! Integration tests: the built `nsys-lens` on fixtures, real exports and damaged inputs, and the
//! library on synthetic exports. One binary, one module per area.

mod align;
mod analyses;
mod bad_input;
mod breakdown;
mod collectives;
mod docs;
mod fuzz;
mod gpu_metrics;
mod graphs;
mod hostile;
mod html;
mod kineto;
mod memory;
mod mpi;
mod nsys_rep;
mod nsys_reports;
mod openacc;
mod osrt;
mod paramedir;
mod paraver;
mod parts;
mod payloads;
mod perfetto;
mod python;
mod real_data;
mod real_nsys;
mod regression;
mod roles;
mod scenario;
mod streaming;
mod synth;
mod threads;
mod util;
mod xplane;
