/* split_group.h - koloCommSplit inside a group. */
#ifndef KOLO_CORE_SPLIT_GROUP_H
#define KOLO_CORE_SPLIT_GROUP_H

#include "core/comm_state.h"

/* Records a split as a job of the current group (group.h; *newcomm =
 * NULL until its end). */
koloResult_t kolo_group_add_split(struct koloComm *parent, int color, int key, koloComm_t *newcomm,
                                  const koloConfig_t *config);


#endif
