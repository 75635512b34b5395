//===- ExchangeTest.cpp - the communication plan of one edge --------------===//
//
// geometry::SourceChooser, forwardMoves and classifyExchange on layouts whose
// exchange is known by hand: the gathers of sequence parallelism, the
// all-to-all of a batch-to-hidden reshard, a reduce-scatter of gradients, a
// pipeline send, and the choice among replicas.
//
//===----------------------------------------------------------------------===//

#include "ppc/Support/Exchange.h"

#include <gtest/gtest.h>

using namespace ppc;
using namespace ppc::geometry;

namespace {

/// Rows [lo, hi) of a 2-D tensor with `cols` columns.
Box rows(int64_t lo, int64_t hi, int64_t cols = 8) {
  return {{lo, hi}, {0, cols}};
}
Box cols(int64_t lo, int64_t hi, int64_t rowCount = 8) {
  return {{0, rowCount}, {lo, hi}};
}

/// `n` devices, piece i of `split` on device i.
std::vector<Piece> split(int64_t n, Box (*piece)(int64_t, int64_t, int64_t),
                         int64_t size = 8) {
  std::vector<Piece> pieces;
  for (int64_t i = 0; i < n; ++i)
    pieces.push_back({i, piece(i * size / n, (i + 1) * size / n, 8)});
  return pieces;
}

std::vector<Piece> replicated(int64_t n, const Box &box) {
  std::vector<Piece> pieces;
  for (int64_t i = 0; i < n; ++i)
    pieces.push_back({i, box});
  return pieces;
}

double flat(int64_t, int64_t) { return 1; }

TEST(ExchangeTest, KindNamesRoundTrip) {
  for (ExchangeKind kind : kExchangeKinds)
    EXPECT_EQ(parseExchangeKind(exchangeKindName(kind)), kind);
  EXPECT_FALSE(parseExchangeKind("broadcast"));
  EXPECT_EQ(exchangeKindName(ExchangeKind::Ring), "ring");
  EXPECT_EQ(exchangeKindName(ExchangeKind::AllToAll), "all_to_all");
}

TEST(ExchangeTest, GroupByBoxNumbersInFirstOccurrenceOrder) {
  int32_t n = 0;
  std::vector<int32_t> group =
      groupByBox({rows(4, 8), rows(0, 4), rows(4, 8), rows(0, 4)}, n);
  EXPECT_EQ(n, 2);
  EXPECT_EQ(group, (std::vector<int32_t>{0, 1, 0, 1}));
}

TEST(ExchangeTest, RowsGatheredOnEveryDeviceAreAnAllGather) {
  // Sequence parallelism's gather before a column-parallel linear.
  std::vector<ExchangeMove> moves =
      forwardMoves(split(4, rows), replicated(4, rows(0, 8)), flat);
  ASSERT_EQ(moves.size(), 16u); // 4 local pieces + 12 messages
  ExchangeShape shape = classifyExchange(moves, /*summed=*/false);
  EXPECT_EQ(shape.kind, ExchangeKind::AllGather);
  ASSERT_EQ(shape.groups.size(), 1u);
  EXPECT_EQ(shape.groups[0].devices, (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(ExchangeTest, RowsToColumnsIsAnAllToAll) {
  // Each device sends a distinct quarter of its rows to every other one.
  ExchangeShape shape = classifyExchange(
      forwardMoves(split(4, rows), split(4, cols), flat), false);
  EXPECT_EQ(shape.kind, ExchangeKind::AllToAll);
}

TEST(ExchangeTest, TwoIndependentGroupsOfOneKind) {
  // Devices {0,1} and {2,3} each gather their half of the rows.
  std::vector<Piece> produced = split(4, rows);
  std::vector<Piece> wanted = {
      {0, rows(0, 4)}, {1, rows(0, 4)}, {2, rows(4, 8)}, {3, rows(4, 8)}};
  ExchangeShape shape =
      classifyExchange(forwardMoves(produced, wanted, flat), false);
  EXPECT_EQ(shape.kind, ExchangeKind::AllGather);
  ASSERT_EQ(shape.groups.size(), 2u);
  EXPECT_EQ(shape.groups[1].devices, (std::vector<int64_t>{2, 3}));
}

TEST(ExchangeTest, OneSenderIsPointToPoint) {
  // A pipeline send: the whole value from device 0 to device 1.
  ExchangeShape shape = classifyExchange(
      forwardMoves({{0, rows(0, 8)}}, {{1, rows(0, 8)}}, flat), false);
  EXPECT_EQ(shape.kind, ExchangeKind::PointToPoint);
  // Gathering onto one device only is no collective either.
  shape = classifyExchange(
      forwardMoves(split(4, rows), {{0, rows(0, 8)}}, flat), false);
  EXPECT_EQ(shape.kind, ExchangeKind::PointToPoint);
}

TEST(ExchangeTest, UnequalPiecesAreNoCollective) {
  std::vector<Piece> produced = {{0, rows(0, 2)}, {1, rows(2, 8)}};
  ExchangeShape shape = classifyExchange(
      forwardMoves(produced, replicated(2, rows(0, 8)), flat), false);
  EXPECT_EQ(shape.kind, ExchangeKind::PointToPoint);
}

TEST(ExchangeTest, LinedUpPiecesAreLocal) {
  ExchangeShape shape = classifyExchange(
      forwardMoves(split(4, rows), split(4, rows), flat), false);
  EXPECT_EQ(shape.kind, ExchangeKind::Local);
  EXPECT_TRUE(shape.groups.empty());
}

TEST(ExchangeTest, SummedGradientsOfAGatherAreAReduceScatter) {
  // The backward of the all-gather above: each device holds the gradient
  // of all rows and sends each owner its quarter, which the owner sums.
  std::vector<ExchangeMove> moves;
  for (int64_t from = 0; from < 4; ++from)
    for (int64_t to = 0; to < 4; ++to)
      if (from != to)
        moves.push_back({from, to, rows(2 * to, 2 * to + 2), false});
  EXPECT_EQ(classifyExchange(moves, /*summed=*/true).kind,
            ExchangeKind::ReduceScatter);
  // Unsummed, the same messages deliver distinct data: an all-to-all.
  EXPECT_EQ(classifyExchange(moves, /*summed=*/false).kind,
            ExchangeKind::AllToAll);
}

TEST(ExchangeTest, TwoWaySummedExchangeOfWholePiecesIsAGather) {
  // The backward of a reduce-scatter of two: each device's gradient piece
  // goes whole to the other copy of the result.
  std::vector<ExchangeMove> moves = {{0, 1, cols(0, 4), true},
                                     {1, 0, cols(4, 8), true}};
  EXPECT_EQ(classifyExchange(moves, /*summed=*/true).kind,
            ExchangeKind::AllGather);
  moves[0].whole = moves[1].whole = false;
  EXPECT_EQ(classifyExchange(moves, /*summed=*/true).kind,
            ExchangeKind::ReduceScatter);
}

TEST(ExchangeTest, MixedGroupsArePointToPoint) {
  std::vector<ExchangeMove> moves = {{0, 1, rows(0, 4), true},
                                     {1, 0, rows(4, 8), true},
                                     {2, 3, rows(0, 8), true}};
  ExchangeShape shape = classifyExchange(moves, false);
  EXPECT_EQ(shape.kind, ExchangeKind::PointToPoint);
  ASSERT_EQ(shape.groups.size(), 2u);
  EXPECT_EQ(shape.groups[0].kind, ExchangeKind::AllGather);
  EXPECT_EQ(shape.groups[1].kind, ExchangeKind::PointToPoint);
}

TEST(ExchangeTest, ChooserPrefersTheLocalCopyThenTheFastestLink) {
  // Two copies of rows [0, 8) on devices 0 and 1, one of rows [8, 16) on 2.
  std::vector<Box> held = {rows(0, 8), rows(0, 8), rows(8, 16)};
  std::vector<int64_t> devices = {0, 1, 2};
  int32_t n = 0;
  std::vector<int32_t> group = groupByBox(held, n);
  SourceChooser chooser(held, devices, group, n);
  // Device 1 reads its own copy.
  auto sources = chooser.choose(rows(0, 16), 1, flat);
  ASSERT_EQ(sources.size(), 2u);
  EXPECT_EQ(sources[0].instance, 1);
  EXPECT_EQ(sources[0].volume, 64);
  EXPECT_EQ(sources[1].instance, 2);
  // Device 3 reads from the copy with the faster link (device 1), and on
  // equal links from the lowest instance.
  auto fasterFrom1 = [](int64_t from, int64_t) {
    return from == 1 ? 2.0 : 1.0;
  };
  sources = chooser.choose(rows(4, 12), 3, fasterFrom1);
  ASSERT_EQ(sources.size(), 2u);
  EXPECT_EQ(sources[0].instance, 1);
  EXPECT_EQ(sources[0].volume, 32);
  EXPECT_EQ(chooser.choose(rows(4, 12), 3, flat)[0].instance, 0);
  // A region no piece holds reads nothing.
  EXPECT_TRUE(chooser.choose(rows(16, 20), 3, flat).empty());
}

} // namespace
