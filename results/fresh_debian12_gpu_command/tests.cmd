ctest --test-dir build -j"$(nproc)" --output-on-failure; sh tests/skip_reasons.sh build $?
