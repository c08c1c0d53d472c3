// Linked with the whole of one layer's library and nothing above it
// (tests/CMakeLists.txt): if that layer's code referred to a symbol of a layer
// it must not depend on, this program would fail to link. Running it only
// confirms it was built.
int main() { return 0; }
