// Native-tier plumbing check (core/tests/native_tier.rs): c[i] = a[i] + b[i] on u32, with the
// same bindings as the native matmul (two read buffers, one written, the parameter block at 3).
// No cooperative matrices, so it runs on any adapter with wgpu's passthrough shaders (lavapipe
// too): the test proves the SPIR-V path, the explicit layout and the parameter block there.
#version 450
layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer A { uint a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { uint b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { uint c[]; };
layout(std140, set = 0, binding = 3) uniform Params { uint n; } p;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n) {
        c[i] = a[i] + b[i];
    }
}
