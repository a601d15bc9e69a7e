#include "cluster_build.h"

namespace hetplan::cluster::detail {

int add_vertex(Cluster& c, VertexKind kind, std::string name) {
  c.vertices.push_back(Vertex{kind, std::move(name)});
  return static_cast<int>(c.vertices.size()) - 1;
}

int add_link(Cluster& c, int from, int to, BytesPerSecond bandwidth, Seconds latency) {
  Link l;
  l.from = from;
  l.to = to;
  l.bandwidth = bandwidth;
  l.latency = latency;
  l.name = c.vertices[from].name + "->" + c.vertices[to].name;
  c.links.push_back(std::move(l));
  return static_cast<int>(c.links.size()) - 1;
}

void index_links(Cluster& c) {
  c.out_links.assign(c.vertices.size(), {});
  for (std::size_t l = 0; l < c.links.size(); ++l)
    c.out_links[c.links[l].from].push_back(static_cast<int>(l));
}

}  // namespace hetplan::cluster::detail
