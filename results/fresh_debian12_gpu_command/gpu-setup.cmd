sh launch/install_gpu.sh && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j"$(nproc)" && launch/local.sh -- ./build/trainbench
