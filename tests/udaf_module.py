"""The source of a UDF module written for PyFlink (``from pyflink.table.udf import udaf``),
which the Python aggregate function tests write next to their scripts: PyFlink's
WeightedAvg example (with retract and merge), a function without retract or merge, one
with retract, a pandas one, and one that is no AggregateFunction."""

SOURCE = '''
from pyflink.common import Row
from pyflink.table import AggregateFunction, DataTypes
from pyflink.table.udf import udaf


class WeightedAvg(AggregateFunction):
    def create_accumulator(self):
        return Row(0, 0)

    def get_value(self, accumulator):
        return None if accumulator[1] == 0 else accumulator[0] / accumulator[1]

    def accumulate(self, accumulator, value, weight):
        if value is not None and weight is not None:
            accumulator[0] += value * weight
            accumulator[1] += weight

    def retract(self, accumulator, value, weight):
        if value is not None and weight is not None:
            accumulator[0] -= value * weight
            accumulator[1] -= weight

    def merge(self, accumulator, accumulators):
        for other in accumulators:
            accumulator[0] += other[0]
            accumulator[1] += other[1]

    def get_result_type(self):
        return DataTypes.DOUBLE()


weighted_avg = udaf(WeightedAvg())


class Words(AggregateFunction):
    """Its words sorted and joined by '-': no retract, no merge."""

    def create_accumulator(self):
        return []

    def accumulate(self, accumulator, word):
        if word is not None:
            accumulator.append(word)

    def get_value(self, accumulator):
        return "-".join(sorted(accumulator))


words = udaf(Words(), result_type=DataTypes.STRING(), accumulator_type=DataTypes.ARRAY(DataTypes.STRING()))


class LiveWords(Words):
    def retract(self, accumulator, word):
        if word is not None:
            accumulator.remove(word)


live_words = udaf(LiveWords(), result_type=DataTypes.STRING())


@udaf(result_type=DataTypes.BIGINT(), func_type="pandas")
def spread(v):
    return int(v.max() - v.min()) if v.notna().any() else None


@udaf(result_type=DataTypes.BIGINT())
def no_methods(v):
    return 1


incomplete = udaf(no_methods._func, result_type=DataTypes.BIGINT())
'''
