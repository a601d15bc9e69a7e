// The form in which `hetplan run` executes a plan. Two kinds of plan run as a simpler plan that
// takes the same training step: an op-level plan that is a stage plan in disguise (op_groups.h)
// runs as that stage plan, a plan that splits every op by batch inside a replica
// (batch_split.h) runs as one replica per device, and ZeRO-3 over one stage of single-device
// replicas runs as HAP's batch program with every weight sharded (batch_split.h). The planner's
// --runnable check and the runtime both judge this form, so that what one accepts the other runs.
#pragma once

#include <set>

#include "hetplan/model/model.h"
#include "hetplan/plan/plan.h"

namespace hetplan::plan {

struct RunForm {
  Plan plan;                         // what runs
  int stages_from_op_level = 0;      // > 0: the op-level plan became this many stages
  bool per_device_replicas = false;  // replicas that split every op by batch were split per device
  bool zero3_batch_program = false;  // ZeRO-3 over single-device replicas became a batch program
  // A stage plan the runtime has no stage module for (a VGG, an Inception) runs op by op as
  // as_op_level_plan's plan (set by runtime::executable_form, which knows the runtime).
  bool op_level_from_stages = false;
};

RunForm run_form(const Plan& p, const model::Model& m);

// The devices a plan places work on: its stages' replicas and its op groups, ascending.
std::set<int> plan_devices(const Plan& p);

}  // namespace hetplan::plan
