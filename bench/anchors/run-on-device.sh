#!/usr/bin/env bash
# On the GPU machine, from the folder prepare.sh made (carried):
#   run-on-device.sh build   builds llama.cpp with CUDA (sm_90) and Vulkan in one llama-bench /
#                            llama-batched-bench (16 cores: ~4-5 min, in a background process that
#                            survives between calls while the machine stays warm) and writes the
#                            random-weight GGUFs (smol.gguf, l1b_q4_0.gguf, l1b_q8_0.gguf) to /tmp/lcpp
#   run-on-device.sh wait    waits for the build (up to WAIT x 5 s)
#   run-on-device.sh pack    writes the built binaries and libraries to $OUT as lcpp-bin.tar.xz.aa,
#                            .ab, ... (15 MiB parts: the device tool returns files of up to 16 MiB);
#                            put them beside this script (build/anchors) and the next `build`
#                            unpacks them instead of compiling (same machine image: the CUDA
#                            runtime and driver libraries are the machine's own)
#   run-on-device.sh bench MODEL.gguf [BACKENDS]  llama-bench: prefill 512, decode 128 tokens after
#                            0 and 2048 (flash attention on, all layers on the GPU), per backend
#                            (default "CUDA0 Vulkan0"); then llama-batched-bench, batch 1/4/16
set -u
G=$(cd "$(dirname "$0")" && pwd); W=/tmp/lcpp; mkdir -p $W
case "${1:-}" in
build)
  if ls $G/lcpp-bin.tar.xz.* >/dev/null 2>&1 && [ ! -f $W/build.done ]; then
    # The binaries carry their build folder as RPATH: unpack them where they were built.
    mkdir -p $W/src/build/bin && cat $G/lcpp-bin.tar.xz.* | xz -d | tar x -C $W/src/build/bin \
      && touch $W/build.started $W/build.done && echo "llama.cpp: prebuilt binaries unpacked"
  fi
  [ -d $W/src/ggml ] || { mkdir -p $W/src && tar xzf $G/llamacpp-src.tgz -C $W/src; }
  mkdir -p $W/vk-trixie $W/vk-bookworm
  for f in $G/debs-trixie/*.deb; do dpkg -x $f $W/vk-trixie; done
  for f in $G/debs-bookworm/*.deb; do dpkg -x $f $W/vk-bookworm; done
  glslc=$W/vk-trixie/usr/bin/glslc; export LD_LIBRARY_PATH=$W/vk-trixie/usr/lib/x86_64-linux-gnu
  if ! $glslc --version >/dev/null 2>&1; then
    echo "trixie's glslc does not run here: bookworm's (no cooperative matrices, no integer dot)"
    glslc=$W/vk-bookworm/usr/bin/glslc; export LD_LIBRARY_PATH=$W/vk-bookworm/usr/lib/x86_64-linux-gnu
  fi
  $glslc --version | head -1
  if [ ! -f $W/build.started ]; then
    touch $W/build.started
    setsid nohup bash -c "cd $W/src && cmake -S . -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DGGML_VULKAN=ON -DVulkan_INCLUDE_DIR=$W/vk-trixie/usr/include -DVulkan_GLSLC_EXECUTABLE=$glslc \
      -DVulkan_LIBRARY=/usr/lib/x86_64-linux-gnu/libvulkan.so.1 \
      -DSPIRV-Headers_DIR=$W/vk-trixie/usr/share/cmake/SPIRV-Headers \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DGGML_NATIVE=OFF -DCMAKE_BUILD_TYPE=Release > $W/cmake.log 2>&1 && \
      cmake --build build --target llama-bench llama-batched-bench -j 16 > $W/build.log 2>&1 && touch $W/build.done" \
      > /dev/null 2>&1 < /dev/null &
  fi
  python3 -m pip install -q --no-deps --target /tmp/site $G/gguf-*.whl >/dev/null 2>&1
  export PYTHONPATH=/tmp/site
  [ -f $W/smol.gguf ] || python3 $G/make_gguf.py smol $G/smol_meta.pkl $W/smol.gguf
  [ -f $W/l1b_q4_0.gguf ] || python3 $G/make_gguf.py llama1b q4_0 $G/smol_meta.pkl $W/l1b_q4_0.gguf
  [ -f $W/l1b_q8_0.gguf ] || python3 $G/make_gguf.py llama1b q8_0 $G/smol_meta.pkl $W/l1b_q8_0.gguf
  grep -i "cooperative\|integer_dot\|Vulkan found\|CUDA found" $W/cmake.log 2>/dev/null
  ;;
wait)
  for i in $(seq 1 ${WAIT:-100}); do
    [ -f $W/build.done ] && break
    grep -q "Configuring incomplete\|errors occurred" $W/cmake.log 2>/dev/null && { tail -30 $W/cmake.log; exit 1; }
    grep -q "Error [0-9]" $W/build.log 2>/dev/null && { grep -B5 -m3 "error" $W/build.log | tail -40; exit 1; }
    sleep 5
  done
  [ -f $W/build.done ] || { tail -3 $W/build.log; echo "BUILD NOT DONE YET"; exit 2; }
  grep -i "cooperative\|integer_dot" $W/cmake.log
  echo "llama.cpp built"
  ;;
pack)
  [ -f $W/build.done ] || { echo "nothing built"; exit 1; }
  mkdir -p $W/pack && cp $(find $W/src/build -name llama-bench -type f | head -1) \
    $(find $W/src/build -name llama-batched-bench -type f | head -1) $W/pack/
  find $W/src/build -name "*.so*" \( -type f -o -type l \) -exec cp -P {} $W/pack/ \;
  strip --strip-unneeded $W/pack/* 2>/dev/null
  ls -la $W/pack; tar cf - -C $W/pack . | xz -T16 -6 | split -b 15M - ${OUT:-/tmp}/lcpp-bin.tar.xz.
  ls -la ${OUT:-/tmp}/lcpp-bin.tar.xz.*
  ;;
bench)
  export LD_LIBRARY_PATH=$W/src/build/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}  # where unpacked libraries lie
  B=$(find $W/src/build -name llama-bench -type f | head -1)
  BB=$(find $W/src/build -name llama-batched-bench -type f | head -1)
  for dev in ${3:-CUDA0 Vulkan0}; do
    echo "== llama-bench $2 on $dev"
    $B -m "$2" -p 512 -n 128 -d 0,2048 -ngl 99 -fa 1 -r ${REPS:-3} -dev $dev -o md 2>&1 | grep -v "^$"
    echo "== llama-batched-bench $2 on $dev (batch 1/4/16, 128-token prompts, 128 new tokens each)"
    $BB -m "$2" -c 8192 -b 2048 -ub 512 -npp 128 -ntg 128 -npl 1,4,16 -ngl 99 -fa on -dev $dev 2>&1 \
      | grep -E "^\|" | head -8
  done
  ;;
*) sed -n 2,12p "$0"; exit 1 ;;
esac
