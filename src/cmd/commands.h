/* commands.h - the subcommands main() dispatches to. Each takes the flags
 * after the subcommand name and returns the process exit status. */
#ifndef TB_COMMANDS_H
#define TB_COMMANDS_H

int tb_cmd_train(int argc, char **argv);
int tb_cmd_step(int argc, char **argv);
int tb_cmd_mkdata(int argc, char **argv);
int tb_cmd_loader_bench(int argc, char **argv);
int tb_cmd_loader_feed(int argc, char **argv); /* loader-bench --feed */
int tb_cmd_allreduce_bench(int argc, char **argv);
int tb_cmd_preflight(int argc, char **argv);
int tb_cmd_report(int argc, char **argv);
int tb_cmd_probe(int argc, char **argv);
int tb_cmd_project(int argc, char **argv);

#endif
