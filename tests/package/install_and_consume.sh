cmake --install build --prefix "$PWD/build-install"   # headers, libraries, `zero`, the CMake package
cmake -S tests/package/consumer -B build-consumer -DCMAKE_PREFIX_PATH="$PWD/build-install"
cmake --build build-consumer
build-consumer/consumer                  # consumer ok: padded=24 shard3=[18,24) bias=2
build-install/bin/zero --version
