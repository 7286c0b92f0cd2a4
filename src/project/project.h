/* project.h - the project room's public face: a projection's one-rank step
 * (projection_profile.h), the fabrics and alpha-beta costs (fabric.h,
 * projection.h), and the tables and /projection rows it prints and stores
 * (projection_report.h). */
#ifndef TB_PROJECT_H
#define TB_PROJECT_H

#include "src/project/fabric.h"
#include "src/project/projection.h"
#include "src/project/projection_profile.h"
#include "src/project/projection_report.h"

#endif
