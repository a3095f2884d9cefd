// A main() for the harnesses of fuzz/ without libFuzzer, so that every gcc build (the host
// and the ASan/UBSan passes of ./dev test) runs them: each file of the corpus directories
// through LLVMFuzzerTestOneInput, then a bounded number of deterministic mutations of them
// (bit flips, byte changes, inserts, deletions, duplications, splices of two inputs and
// dictionary tokens). Stops mutating at --mutations=N runs or --seconds=S, whichever first.
//   replay_main [--mutations=N] [--seconds=S] [--dict=FILE] DIR_OR_FILE...
// A harness signals a failure by crashing or aborting, as under libFuzzer; the input that
// did it is left in BINARY.last-input (run the binary on that file alone to reproduce).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;
using Input = std::vector<std::uint8_t>;

Input readAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Input(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The values of a libFuzzer dictionary: lines `name="value"` or `"value"` with \\, \" and
// \xNN escapes. Other lines are ignored.
std::vector<Input> readDictionary(const fs::path& path) {
  std::vector<Input> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t open = line.find('"');
    const std::size_t close = line.rfind('"');
    if (line.empty() || line[0] == '#' || open == std::string::npos || close <= open) continue;
    Input token;
    for (std::size_t i = open + 1; i < close; ++i) {
      if (line[i] == '\\' && i + 1 < close) {
        if (line[i + 1] == 'x' && i + 3 < close) {
          token.push_back(std::uint8_t(std::stoi(line.substr(i + 2, 2), nullptr, 16)));
          i += 3;
        } else {
          token.push_back(std::uint8_t(line[i + 1]));
          ++i;
        }
      } else {
        token.push_back(std::uint8_t(line[i]));
      }
    }
    if (!token.empty()) out.push_back(std::move(token));
  }
  return out;
}

// xorshift64*: the same mutations on every run and every machine.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed | 1) {}
  std::uint64_t next() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 2685821657736338717ull;
  }
  std::size_t below(std::size_t n) { return n == 0 ? 0 : std::size_t(next() % n); }

 private:
  std::uint64_t state_;
};

constexpr std::size_t kMaxLen = 65536;

Input mutate(const Input& base, const std::vector<Input>& corpus,
             const std::vector<Input>& dictionary, Random& random) {
  Input out = base;
  const int steps = 1 + int(random.below(4));
  for (int s = 0; s < steps; ++s) {
    switch (random.below(dictionary.empty() ? 7 : 8)) {
      case 0:  // flip a bit
        if (!out.empty()) out[random.below(out.size())] ^= std::uint8_t(1u << random.below(8));
        break;
      case 1:  // an interesting byte
        if (!out.empty()) {
          static constexpr std::uint8_t kBytes[] = {0,    0xff, 0x7f, 0x80, '0', '9', '"',
                                                    '\\', '{',  '}',  '[',  ']', ':', ',',
                                                    '\n', '\r', ' ',  '-',  '.', 'e', 0xc3};
          out[random.below(out.size())] = kBytes[random.below(sizeof kBytes)];
        }
        break;
      case 2: {  // insert random bytes
        const std::size_t at = random.below(out.size() + 1);
        const std::size_t n = 1 + random.below(8);
        Input bytes(n);
        for (auto& b : bytes) b = std::uint8_t(random.next());
        out.insert(out.begin() + std::ptrdiff_t(at), bytes.begin(), bytes.end());
        break;
      }
      case 3:  // delete a range
        if (!out.empty()) {
          const std::size_t at = random.below(out.size());
          const std::size_t n = 1 + random.below(std::min<std::size_t>(out.size() - at, 16));
          out.erase(out.begin() + std::ptrdiff_t(at), out.begin() + std::ptrdiff_t(at + n));
        }
        break;
      case 4:  // duplicate a range
        if (!out.empty()) {
          const std::size_t at = random.below(out.size());
          const std::size_t n = 1 + random.below(std::min<std::size_t>(out.size() - at, 64));
          const Input piece(out.begin() + std::ptrdiff_t(at), out.begin() + std::ptrdiff_t(at + n));
          const std::size_t to = random.below(out.size() + 1);
          out.insert(out.begin() + std::ptrdiff_t(to), piece.begin(), piece.end());
        }
        break;
      case 5: {  // splice: this input's head, another's tail
        const Input& other = corpus[random.below(corpus.size())];
        const std::size_t cut = random.below(out.size() + 1);
        const std::size_t from = random.below(other.size() + 1);
        out.resize(cut);
        out.insert(out.end(), other.begin() + std::ptrdiff_t(from), other.end());
        break;
      }
      case 6:  // truncate
        out.resize(random.below(out.size() + 1));
        break;
      default: {  // a dictionary token
        const Input& token = dictionary[random.below(dictionary.size())];
        const std::size_t at = random.below(out.size() + 1);
        out.insert(out.begin() + std::ptrdiff_t(at), token.begin(), token.end());
        break;
      }
    }
  }
  if (out.size() > kMaxLen) out.resize(kMaxLen);
  return out;
}

// Where the input being run is written first, so that a crash leaves its reproducer
// (the harness binary's path + ".last-input"); empty: not written.
std::string lastInputPath;

int run(const Input& input) {
  if (!lastInputPath.empty()) {
    std::ofstream out(lastInputPath, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(input.data()), std::streamsize(input.size()));
  }
  // A copy of exactly the input's size, so that ASan sees any read past its end.
  auto* copy = new std::uint8_t[input.size() + 1];
  std::copy(input.begin(), input.end(), copy);
  const int rc = LLVMFuzzerTestOneInput(copy, input.size());
  delete[] copy;
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  long mutations = 2000;
  double seconds = 3;
  std::vector<Input> dictionary;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--mutations=", 0) == 0) {
      mutations = std::atol(arg.c_str() + 12);
    } else if (arg.rfind("--seconds=", 0) == 0) {
      seconds = std::atof(arg.c_str() + 10);
    } else if (arg.rfind("--dict=", 0) == 0) {
      dictionary = readDictionary(arg.substr(7));
    } else if (fs::is_directory(arg)) {
      for (const auto& entry : fs::directory_iterator(arg)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else if (fs::is_regular_file(arg)) {
      files.emplace_back(arg);
    } else {
      std::fprintf(stderr, "replay: %s: no such file or directory\n", arg.c_str());
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  lastInputPath = std::string(argv[0]) + ".last-input";
  if (files.empty()) {
    std::fprintf(stderr, "replay: no inputs\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<Input> corpus;
  for (const auto& file : files) {
    corpus.push_back(readAll(file));
    std::fprintf(stderr, "replay: %s\n", file.c_str());
    run(corpus.back());
  }
  const auto budget = std::chrono::duration<double>(seconds);
  Random random(0x6e6f6465776172ull);  // "nodewar"
  long done = 0;
  for (; done < mutations; ++done) {
    if ((done & 15) == 0 && std::chrono::steady_clock::now() - start > budget) break;
    const Input input =
        mutate(corpus[std::size_t(done) % corpus.size()], corpus, dictionary, random);
    run(input);
  }
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::error_code ignored;
  fs::remove(lastInputPath, ignored);
  std::printf("replay: %zu corpus inputs and %ld mutations in %.2f s, no crash\n", corpus.size(),
              done, took);
  return 0;
}
