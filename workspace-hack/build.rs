// A build script makes cargo unify the features of build dependencies too (hakari's recipe).
fn main() {}
